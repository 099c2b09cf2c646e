import { z } from 'zod';
import { collectionName } from './names.ts';

export const createCollectionBody = z.object({
  name: collectionName,
  description: z.string().max(10_000).optional(),
  embedding_model: z
    .string()
    .min(1)
    .max(200)
    .default('text-embedding-ada-002')
    .describe(
      'Fixed at creation. A local model by its name; else a model a configured provider serves (chunks and queries are then embedded through the gateway, the dimensions measured by one probe call now); else the OpenAI names are aliases of the local default model. Unknown: 400; a provider down or whose model list is unreadable: 502/503',
    ),
});
export type CreateCollectionBody = z.infer<typeof createCollectionBody>;

export const updateCollectionBody = z.object({ description: z.string().max(10_000) });

export const collectionParams = z.object({ collection_name: z.string().min(1).max(200) });

export const collectionRecord = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  embedding_model: z.string(),
  embedding_provider: z
    .string()
    .describe(
      '`local`, or the upstream provider first in line at creation (any provider serving the model embeds, with failover)',
    ),
  embedding_model_resolved: z.string().describe('The model that really embeds chunks and queries (aliases resolved)'),
  dimensions: z.number().int().describe('Vector length, fixed at creation (for an upstream model: from a probe call)'),
  document_count: z.number().int().describe('Processed documents'),
  chunk_count: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type CollectionRecord = z.infer<typeof collectionRecord>;

export const collectionList = z.object({ collections: z.array(collectionRecord) });
export { message } from '../common.schemas.ts';
