import { index, jsonb, pgTable, text, timestamp, uniqueIndex } from '../orm.ts';
import { createdAt, updatedAt } from '../columns.ts';

export interface KeyRateLimits {
  requests_per_minute?: number | null;
  requests_per_hour?: number | null;
  requests_per_day?: number | null;
}

export interface KeyQuota {
  requests_per_day?: number | null;
  tokens_per_month?: number | null;
}

export const apiKeys = pgTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull(),
    /** sha256 of the secret, hex; the secret itself is never stored. */
    secretHash: text('secret_hash').notNull(),
    /** First characters of the secret, shown in listings so operators can tell keys apart. */
    prefix: text('prefix').notNull(),
    scopes: text('scopes').array().notNull(),
    tier: text('tier').notNull(),
    rateLimits: jsonb('rate_limits').$type<KeyRateLimits>(),
    collections: text('collections').array(),
    quota: jsonb('quota').$type<KeyQuota>(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }),
    revokedAt: timestamp('revoked_at', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [uniqueIndex('api_keys_secret_hash_idx').on(t.secretHash), index('api_keys_created_idx').on(t.createdAt)],
);

export type ApiKeyRow = typeof apiKeys.$inferSelect;
