import type { Db } from '../db/client.ts';
import type { EmbeddingRegistry } from '../embeddings/registry.ts';
import { createCollectionsRepository } from './collections.repository.ts';
import { collectionsRoutes } from './collections.routes.ts';
import { createCollectionsService, type CollectionsServiceDeps } from './collections.service.ts';

export interface CollectionsModuleDeps {
  db: Db;
  embeddings: EmbeddingRegistry;
  hnsw: CollectionsServiceDeps['hnsw'];
  onDeleted?: () => void;
}

/** Collections: their records and each one's vector index. */
export function createCollectionsModule(deps: CollectionsModuleDeps) {
  const service = createCollectionsService({
    repo: createCollectionsRepository(deps.db),
    embeddings: deps.embeddings,
    hnsw: deps.hnsw,
    onDeleted: deps.onDeleted,
  });
  return { routes: collectionsRoutes(service), service };
}
