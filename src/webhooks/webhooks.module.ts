import type { Logger } from 'pino';
import type { WebhookConfig } from '../config.ts';
import type { Db } from '../db/client.ts';
import { startWebhookSender, type WebhookSender } from './sender.ts';
import { createSealer } from './signing.ts';
import { createWebhooksRepository } from './webhooks.repository.ts';
import { webhooksRoutes } from './webhooks.routes.ts';
import { createWebhooksService } from './webhooks.service.ts';

export interface WebhooksModuleDeps {
  db: Db;
  config: WebhookConfig;
  logger: Logger;
}

/**
 * Webhook endpoints (routes and service) and the sender of their deliveries. Deliveries are rows
 * the database's triggers insert; whichever processes ingest send them (`startSender`).
 */
export function createWebhooksModule(deps: WebhooksModuleDeps) {
  const repo = createWebhooksRepository(deps.db);
  const sealer = deps.config.signingKey === undefined ? undefined : createSealer(deps.config.signingKey);
  const service = createWebhooksService({ repo, sealer, allowPrivateTargets: deps.config.allowPrivateTargets });
  return {
    routes: webhooksRoutes(service),
    service,
    startSender: (): WebhookSender => startWebhookSender({ repo, sealer, config: deps.config, logger: deps.logger }),
  };
}
