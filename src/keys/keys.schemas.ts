import { z } from 'zod';
import { collectionName } from '../collections/names.ts';
import { scopes, tiers } from './principal.ts';

const limit = z.number().int().positive().nullable();

export const rateLimitsSchema = z
  .object({
    requests_per_minute: limit.optional(),
    requests_per_hour: limit.optional(),
    requests_per_day: limit.optional(),
  })
  .strict();

export const quotaSchema = z
  .object({
    requests_per_day: limit.optional(),
    tokens_per_month: limit.optional(),
  })
  .strict();

const keyFields = {
  name: z.string().trim().min(1).max(200),
  scopes: z
    .array(z.enum(scopes))
    .min(1)
    .refine((list) => new Set(list).size === list.length, 'scopes must not repeat'),
  tier: z.enum(tiers),
  rate_limits: rateLimitsSchema.nullable(),
  collections: z
    .array(collectionName)
    .max(1000)
    .refine((list) => new Set(list).size === list.length, 'collections must not repeat')
    .nullable(),
  quota: quotaSchema.nullable(),
  expires_at: z.iso.datetime({ offset: true }).nullable(),
};

export const createKeyBody = z.object({
  ...keyFields,
  tier: keyFields.tier.default('standard'),
  rate_limits: keyFields.rate_limits.optional(),
  collections: keyFields.collections.optional(),
  quota: keyFields.quota.optional(),
  expires_at: keyFields.expires_at.optional(),
});
export type CreateKeyBody = z.infer<typeof createKeyBody>;

export const updateKeyBody = z.object(keyFields).partial();
export type UpdateKeyBody = z.infer<typeof updateKeyBody>;

export const keyIdParams = z.object({ id: z.string().min(1).max(100) });

export const keyRecord = z.object({
  id: z.string(),
  name: z.string(),
  prefix: z.string().describe('The first characters of the secret, to tell keys apart'),
  scopes: z.array(z.enum(scopes)),
  tier: z.enum(tiers),
  rate_limits: z.object({
    requests_per_minute: z.number().int().nullable(),
    requests_per_hour: z.number().int().nullable(),
    requests_per_day: z.number().int().nullable(),
  }),
  collections: z.array(z.string()).nullable(),
  quota: z.object({
    requests_per_day: z.number().int().nullable(),
    tokens_per_month: z.number().int().nullable(),
  }),
  expires_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type KeyRecord = z.infer<typeof keyRecord>;

export const createdKeyRecord = keyRecord.extend({
  key: z.string().describe('The secret. Shown only in this response.'),
});

export const keyList = z.object({ keys: z.array(keyRecord) });

export { message as messageResponse } from '../common.schemas.ts';

const windowUsage = z.object({
  window: z.enum(['minute', 'hour', 'day']),
  limit: z.number().int(),
  used: z.number().int(),
  remaining: z.number().int(),
  reset: z.number().int().describe('Unix seconds at which the window resets'),
});

const quotaUsage = z.object({
  limit: z.number().int().nullable(),
  used: z.number().int(),
  period_start: z.string(),
  period_end: z.string(),
});

export const keyUsage = z.object({
  key_id: z.string(),
  rate_limits: z.array(windowUsage),
  quota: z.object({ requests_per_day: quotaUsage, tokens_per_month: quotaUsage }),
  daily: z.array(
    z.object({
      day: z.string(),
      model: z.string(),
      requests: z.number().int(),
      prompt_tokens: z.number().int(),
      completion_tokens: z.number().int(),
      total_tokens: z.number().int(),
    }),
  ),
});
export type KeyUsage = z.infer<typeof keyUsage>;
