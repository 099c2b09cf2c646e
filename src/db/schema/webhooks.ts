import { index, integer, jsonb, pgTable, text, timestamp } from '../orm.ts';
import { createdAt, updatedAt } from '../columns.ts';
import { apiKeys } from './keys.ts';

/** An endpoint a key registered: events of collections that key may use are delivered to it. */
export const webhookEndpoints = pgTable(
  'webhook_endpoints',
  {
    id: text('id').primaryKey(),
    /** The key that registered it (its collection restriction applies); null: the admin key. */
    keyId: text('key_id').references(() => apiKeys.id, { onDelete: 'cascade' }),
    url: text('url').notNull(),
    events: text('events').array().notNull(),
    /** Only this collection's events; null for every collection the key may use. */
    collectionName: text('collection_name'),
    /** The signing secret, AES-256-GCM under WEBHOOK_SIGNING_KEY: never stored in clear. */
    secretSealed: text('secret_sealed').notNull(),
    createdAt: createdAt(),
  },
  (t) => [index('webhook_endpoints_key_idx').on(t.keyId)],
);

export type WebhookDeliveryStatus = 'pending' | 'delivered' | 'failed';

/** One event for one endpoint: written in the transaction of the change, sent by the workers. */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    /** Also the `webhook-id` header: the same on every attempt of this delivery. */
    id: text('id').primaryKey(),
    endpointId: text('endpoint_id')
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: 'cascade' }),
    event: text('event').notNull(),
    payload: jsonb('payload').$type<Record<string, unknown>>().notNull(),
    status: text('status').$type<WebhookDeliveryStatus>().notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    leaseOwner: text('lease_owner'),
    leaseExpiresAt: timestamp('lease_expires_at', { withTimezone: true, mode: 'date' }),
    lastStatus: integer('last_status'),
    lastError: text('last_error'),
    /** The start of the receiver's last answer, a few hundred bytes at most. */
    responseBody: text('response_body'),
    deliveredAt: timestamp('delivered_at', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('webhook_deliveries_due_idx').on(t.status, t.nextAttemptAt),
    index('webhook_deliveries_endpoint_idx').on(t.endpointId, t.createdAt),
  ],
);
