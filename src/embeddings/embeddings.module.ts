import { embeddingsRoutes } from './embeddings.routes.ts';
import { createEmbeddingsService, type EmbeddingsServiceDeps } from './embeddings.service.ts';

/** /embeddings: the local models of the registry, and models an upstream provider serves. */
export function createEmbeddingsModule(deps: EmbeddingsServiceDeps) {
  const service = createEmbeddingsService(deps);
  return { routes: embeddingsRoutes(service), service };
}
