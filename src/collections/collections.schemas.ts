import { z } from 'zod';
import { collectionName } from './names.ts';

export const createCollectionBody = z.object({
  name: collectionName,
  description: z.string().max(10_000).optional(),
  embedding_model: z.string().min(1).max(200).default('text-embedding-ada-002'),
});
export type CreateCollectionBody = z.infer<typeof createCollectionBody>;

export const updateCollectionBody = z.object({ description: z.string().max(10_000) });

export const collectionParams = z.object({ collection_name: z.string().min(1).max(200) });

export const collectionRecord = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  embedding_model: z.string(),
  embedding_provider: z.string().describe('`local` or the upstream provider that embeds this collection'),
  embedding_model_resolved: z.string().describe('The model that really embeds chunks and queries'),
  dimensions: z.number().int(),
  document_count: z.number().int().describe('Processed documents'),
  chunk_count: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type CollectionRecord = z.infer<typeof collectionRecord>;

export const collectionList = z.object({ collections: z.array(collectionRecord) });
export { message } from '../common.schemas.ts';
