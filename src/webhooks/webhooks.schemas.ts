import { z } from 'zod';

export const webhookEvents = [
  'document.processed',
  'document.failed',
  'document.deleted',
  'collection.deleted',
] as const;

export const createWebhookBody = z.object({
  url: z
    .url({ protocol: /^https?$/ })
    .max(2_000)
    // They would be shown in every listing of the endpoint, and are not sent (no Authorization).
    .refine((url) => {
      const parsed = URL.parse(url);
      return parsed === null || (parsed.username === '' && parsed.password === '');
    }, 'must not carry credentials (user:password@): the receiver authenticates deliveries by their signature')
    .describe(
      'Where events are POSTed; it must resolve to a public address unless the operator allows private targets',
    ),
  events: z
    .array(z.enum(webhookEvents))
    .min(1)
    .max(webhookEvents.length)
    .refine((list) => new Set(list).size === list.length, 'events must not repeat'),
  collection: z
    .string()
    .min(1)
    .max(200)
    .nullish()
    .describe(
      'Only events of the collection of this name (required of a key restricted to collections); absent: every collection the key may use',
    ),
});

export const webhookRecord = z.object({
  id: z.string(),
  url: z.string(),
  events: z.array(z.string()),
  collection: z.string().nullable(),
  created_at: z.string(),
});

export const createdWebhook = webhookRecord.extend({
  secret: z.string().describe('The signing secret (whsec_…), shown only in this answer'),
});

export const webhookList = z.object({
  webhooks: z.array(webhookRecord),
  page: z.number().int(),
  page_size: z.number().int(),
  total: z.number().int().describe('Endpoints this key sees, on every page'),
});
export const webhookListQuery = z.object({
  page: z.coerce.number().int().min(1).default(1),
  page_size: z.coerce.number().int().min(1).max(1_000).default(1_000),
});
export const webhookParams = z.object({ webhook_id: z.string().min(1).max(100) });
export const deliveryParams = webhookParams.extend({ delivery_id: z.string().min(1).max(100) });
export const deliveryListQuery = z.object({
  page: z.coerce.number().int().min(1).default(1),
  page_size: z.coerce.number().int().min(1).max(100).default(20),
});

export const deliveryRecord = z.object({
  id: z.string().describe('Also the webhook-id header of every attempt'),
  event: z.string(),
  status: z.enum(['pending', 'delivered', 'failed']),
  attempts: z.number().int(),
  last_status: z.number().int().nullable(),
  last_error: z.string().nullable(),
  response_body: z.string().nullable().describe('The start of the last answer (256 bytes at most)'),
  payload: z.record(z.string(), z.unknown()),
  created_at: z.string(),
  next_attempt_at: z.string().nullable(),
  delivered_at: z.string().nullable(),
});
export const deliveryList = z.object({ deliveries: z.array(deliveryRecord), page: z.number(), page_size: z.number() });
export { message } from '../common.schemas.ts';

export type CreateWebhookBody = z.infer<typeof createWebhookBody>;
