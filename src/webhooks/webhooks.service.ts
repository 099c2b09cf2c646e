import { newId } from '../db/ids.ts';
import type { webhookDeliveries, webhookEndpoints } from '../db/schema/webhooks.ts';
import { AppError, notFound } from '../errors.ts';
import { BOOTSTRAP_KEY_ID } from '../keys/keys.service.ts';
import { canUseCollection, type Principal } from '../keys/principal.ts';
import { newSigningSecret, type Sealer } from './signing.ts';
import type { WebhooksRepository } from './webhooks.repository.ts';
import type { CreateWebhookBody } from './webhooks.schemas.ts';

type EndpointRow = typeof webhookEndpoints.$inferSelect;
type DeliveryRow = typeof webhookDeliveries.$inferSelect;

const NOT_FOUND = 'Webhook not found';

const toRecord = (row: EndpointRow) => ({
  id: row.id,
  url: row.url,
  events: row.events,
  collection: row.collectionName,
  created_at: row.createdAt.toISOString(),
});

const toDelivery = (row: DeliveryRow) => ({
  id: row.id,
  event: row.event,
  status: row.status,
  attempts: row.attempts,
  last_status: row.lastStatus,
  last_error: row.lastError,
  response_body: row.responseBody,
  payload: row.payload,
  created_at: row.createdAt.toISOString(),
  next_attempt_at: row.status === 'pending' ? row.nextAttemptAt.toISOString() : null,
  delivered_at: row.deliveredAt?.toISOString() ?? null,
});

/** The configured admin key owns no api_keys row: its endpoints have no key. */
const ownerOf = (principal: Principal) => (principal.keyId === BOOTSTRAP_KEY_ID ? null : principal.keyId);

export function createWebhooksService({ repo, sealer }: { repo: WebhooksRepository; sealer: Sealer | undefined }) {
  /** A key sees its own endpoints; an admin sees every one. Others look like missing ones. */
  const requireEndpoint = async (principal: Principal, id: string) => {
    const row = await repo.getEndpoint(id);
    const mine = row !== undefined && (principal.scopes.includes('admin') || row.keyId === ownerOf(principal));
    if (!mine) throw notFound(NOT_FOUND);
    return row;
  };

  return {
    async create(principal: Principal, body: CreateWebhookBody) {
      if (sealer === undefined) {
        throw new AppError({
          code: 'service_unavailable',
          message: 'Webhooks need WEBHOOK_SIGNING_KEY (at least 32 characters) set on the server and workers',
        });
      }
      const collection = body.collection ?? null;
      if (collection !== null && !canUseCollection(principal, collection)) {
        throw notFound('Collection not found');
      }
      const secret = newSigningSecret();
      const row = await repo.createEndpoint({
        id: newId('whk'),
        keyId: ownerOf(principal),
        url: body.url,
        events: [...body.events],
        collectionName: collection,
        secretSealed: sealer.seal(secret),
      });
      return { ...toRecord(row), secret };
    },

    async list(principal: Principal) {
      const rows = await repo.listEndpoints(principal.scopes.includes('admin') ? undefined : ownerOf(principal));
      return { webhooks: rows.map(toRecord) };
    },

    async get(principal: Principal, id: string) {
      return toRecord(await requireEndpoint(principal, id));
    },

    async remove(principal: Principal, id: string) {
      await requireEndpoint(principal, id);
      await repo.deleteEndpoint(id);
      return { message: 'Webhook deleted' };
    },

    async deliveries(principal: Principal, id: string, page: number, pageSize: number) {
      await requireEndpoint(principal, id);
      const rows = await repo.listDeliveries(id, pageSize, (page - 1) * pageSize);
      return { deliveries: rows.map(toDelivery), page, page_size: pageSize };
    },

    async redeliver(principal: Principal, id: string, deliveryId: string) {
      await requireEndpoint(principal, id);
      if (!(await repo.redeliver(id, deliveryId))) throw notFound('Delivery not found');
      return { message: 'Delivery queued' };
    },
  };
}

export type WebhooksService = ReturnType<typeof createWebhooksService>;
