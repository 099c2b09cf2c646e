import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { Db } from './db/client.ts';
import type { EmbeddingRegistry } from './embeddings/registry.ts';
import { createIngestionModule } from './ingestion/ingestion.module.ts';
import type { WebhookSender } from './webhooks/sender.ts';
import { createWebhooksModule } from './webhooks/webhooks.module.ts';

export interface ProcessingDeps {
  db: Db;
  embeddings: EmbeddingRegistry;
  config: Config;
  logger: Logger;
  /** Ingestion jobs at once in this process; 0: none, and no webhook sender either. */
  concurrency: number;
}

/**
 * What the server (src/app.ts) and the standalone worker (src/worker.ts) wire alike, in one
 * place: ingestion (queue, metrics, OCR, the worker) and webhooks, whose deliveries are sent by
 * every process that ingests. The server adds the API domains on top.
 */
export async function createProcessing(deps: ProcessingDeps) {
  const ingestion = await createIngestionModule(deps);
  const webhooks = createWebhooksModule({ db: deps.db, config: deps.config.webhooks, logger: deps.logger });
  let sender: WebhookSender | undefined;
  return {
    ingestion,
    webhooks,
    /** Starts claiming jobs and sending deliveries, when this process ingests. */
    start(): void {
      if (ingestion.service === undefined) return;
      ingestion.service.start();
      sender = webhooks.startSender();
    },
    /** Stops both: running jobs finish or go back to the queue, a delivery in flight finishes. */
    async stop(): Promise<void> {
      await ingestion.service?.stop();
      await sender?.stop();
    },
  };
}

export type Processing = Awaited<ReturnType<typeof createProcessing>>;
