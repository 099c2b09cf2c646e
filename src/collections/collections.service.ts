import { AppError, notFound } from '../errors.ts';
import { canUseCollection, type Principal } from '../keys/principal.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { newId } from '../db/ids.ts';
import type { EmbeddingRegistry } from '../embeddings/registry.ts';
import type { CollectionsRepository, CollectionWithCounts, HnswSettings } from './collections.repository.ts';
import type { CollectionRecord, CreateCollectionBody } from './collections.schemas.ts';

export interface CollectionsServiceDeps {
  repo: CollectionsRepository;
  embeddings: EmbeddingRegistry;
  hnsw: HnswSettings;
  /** A collection was deleted: its rows are the purger's to remove now. */
  onDeleted?: () => void;
}

const NOT_FOUND = 'Collection not found';

export function toCollectionRecord(row: CollectionWithCounts): CollectionRecord {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    embedding_model: row.embeddingModel,
    embedding_provider: row.embeddingProvider,
    embedding_model_resolved: row.embeddingModelResolved,
    dimensions: row.dimensions,
    document_count: row.documentCount,
    chunk_count: row.chunkCount,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}

export function createCollectionsService({ repo, embeddings, hnsw, onDeleted }: CollectionsServiceDeps) {
  return {
    /** The collection by name if this key may use it; any other case is indistinguishable from missing. */
    async requireAccessible(principal: Principal, name: string) {
      if (!canUseCollection(principal, name)) throw notFound(NOT_FOUND);
      const row = await repo.findRowByName(name);
      if (!row) throw notFound(NOT_FOUND);
      return row;
    },

    async create(principal: Principal, input: CreateCollectionBody): Promise<CollectionRecord> {
      // A restricted key creating a collection outside its list could never use it.
      if (!canUseCollection(principal, input.name)) {
        throw new AppError({
          code: 'insufficient_scope',
          message: `This API key may not use collection '${input.name}'`,
        });
      }
      // An upstream model's dimensions were measured by a probe call: fixed from here on.
      const resolved = await embeddings.resolve(input.embedding_model);
      if (!resolved.ok) {
        throw new AppError({
          code: resolved.reason === 'unknown' ? 'invalid_value' : 'service_unavailable',
          message: resolved.message,
          param: 'embedding_model',
        });
      }
      try {
        const row = await repo.insert(
          {
            id: newId('col'),
            name: input.name,
            description: input.description ?? null,
            embeddingModel: input.embedding_model,
            embeddingProvider: resolved.model.provider,
            embeddingModelResolved: resolved.model.name,
            dimensions: resolved.model.dimensions,
          },
          hnsw,
        );
        return toCollectionRecord({ ...row, documentCount: 0, chunkCount: 0 });
      } catch (error) {
        if (isUniqueViolation(error))
          throw new AppError({ code: 'conflict', message: 'Collection name already exists' });
        throw error;
      }
    },

    async list(principal: Principal): Promise<CollectionRecord[]> {
      return (await repo.list(principal.collections)).map(toCollectionRecord);
    },

    async get(principal: Principal, name: string): Promise<CollectionRecord> {
      if (!canUseCollection(principal, name)) throw notFound(NOT_FOUND);
      const row = await repo.findByName(name);
      if (!row) throw notFound(NOT_FOUND);
      return toCollectionRecord(row);
    },

    async updateDescription(principal: Principal, name: string, description: string): Promise<void> {
      const row = await this.requireAccessible(principal, name);
      await repo.updateDescription(row.id, description);
    },

    async delete(principal: Principal, name: string): Promise<void> {
      const row = await this.requireAccessible(principal, name);
      if (!(await repo.markDeleted(row.id))) throw notFound(NOT_FOUND);
      onDeleted?.();
    },
  };
}

export type CollectionsService = ReturnType<typeof createCollectionsService>;
