import { newId } from '../db/ids.ts';
import type { webhookDeliveries, webhookEndpoints } from '../db/schema/webhooks.ts';
import { AppError, invalid, notFound } from '../errors.ts';
import { BOOTSTRAP_KEY_ID } from '../keys/keys.service.ts';
import { canUseCollection, type Principal } from '../keys/principal.ts';
import { newSigningSecret, type Sealer } from './signing.ts';
import { checkLiteralTarget } from './target.ts';
import type { EndpointScope, WebhooksRepository } from './webhooks.repository.ts';
import type { CreateWebhookBody } from './webhooks.schemas.ts';

type EndpointRow = typeof webhookEndpoints.$inferSelect;
type DeliveryRow = typeof webhookDeliveries.$inferSelect;

const NOT_FOUND = 'Webhook not found';
/** Endpoints one key other than an admin key may have. */
export const MAX_ENDPOINTS_PER_KEY = 100;

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

/**
 * The endpoints a key sees and manages: its own, or every key's for an admin; and for a key
 * restricted to collections, only endpoints of a collection it may use, its own included. An
 * endpoint's events and delivery log name its collection's documents, so a restricted admin that
 * saw other keys' endpoints would read what its restriction hides.
 */
const scopeOf = (principal: Principal): EndpointScope => ({
  ownerKeyId: principal.scopes.includes('admin') ? undefined : ownerOf(principal),
  collections: principal.collections,
});

export interface WebhooksServiceDeps {
  repo: WebhooksRepository;
  sealer: Sealer | undefined;
  /** WEBHOOK_ALLOW_PRIVATE_TARGETS: whether an IP literal of a private network may be registered. */
  allowPrivateTargets: boolean;
}

export function createWebhooksService({ repo, sealer, allowPrivateTargets }: WebhooksServiceDeps) {
  /** An endpoint this key may not see looks like a missing one. */
  const requireEndpoint = async (principal: Principal, id: string) => {
    const row = await repo.getEndpoint(id, scopeOf(principal));
    if (row === undefined) throw notFound(NOT_FOUND);
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
      if (collection === null && principal.collections !== null) {
        // What a key restricted to collections sees is decided by the collection, for endpoints as
        // for everything else: one for no collection would be outside every list.
        throw new AppError({
          code: 'insufficient_scope',
          message: 'This API key is restricted to collections: a webhook it registers must name one of them',
          param: 'collection',
        });
      }
      if (collection !== null && !canUseCollection(principal, collection)) {
        throw notFound('Collection not found');
      }
      // A literal address never changes, so one that can never be sent to is refused now rather
      // than after every attempt of every delivery has failed; a host name is checked at each
      // delivery, since where it points can change.
      const target = checkLiteralTarget(new URL(body.url), allowPrivateTargets);
      if (target?.ok === false) throw invalid(`url: ${target.reason}`, 'url');
      // Each endpoint costs the senders attempts: a key may not make them wait on hundreds of
      // endpoints that never answer. Admin keys are the operator's.
      const limit = principal.scopes.includes('admin') ? undefined : MAX_ENDPOINTS_PER_KEY;
      const secret = newSigningSecret();
      const outcome = await repo.createEndpoint(
        {
          id: newId('whk'),
          keyId: ownerOf(principal),
          url: body.url,
          events: [...body.events],
          collectionName: collection,
          secretSealed: sealer.seal(secret),
        },
        limit,
      );
      if ('refused' in outcome) {
        throw new AppError({
          code: 'conflict',
          message: `This API key has ${outcome.refused} webhook endpoints, the most one key may register (${MAX_ENDPOINTS_PER_KEY}); delete one first`,
        });
      }
      return { ...toRecord(outcome.created), secret };
    },

    async list(principal: Principal, page: number, pageSize: number) {
      const scope = scopeOf(principal);
      const [rows, total] = await Promise.all([
        repo.listEndpoints(scope, pageSize, (page - 1) * pageSize),
        repo.countEndpoints(scope),
      ]);
      return { webhooks: rows.map(toRecord), page, page_size: pageSize, total };
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
