import type { CollectionsService } from '../collections/collections.service.ts';
import type { Db } from '../db/client.ts';
import type { EmbeddingRegistry } from '../embeddings/registry.ts';
import { anyTool } from '../tools/tool.types.ts';
import { ragSearchTool } from './rag-search.tool.ts';
import { createRetrievalRepository } from './retrieval.repository.ts';
import { createRetrievalService, type RetrievalDeps } from './retrieval.service.ts';

export interface RetrievalModuleDeps {
  db: Db;
  /** The embedded database: one session, this process's alone (see RetrievalRepositoryOptions). */
  oneSession: boolean;
  collections: CollectionsService;
  embeddings: EmbeddingRegistry;
  settings: RetrievalDeps['settings'];
  rerank: RetrievalDeps['rerank'];
  rerankServes: RetrievalDeps['rerankServes'];
}

/**
 * Hybrid search over collections. It has no routes of its own: callers reach it as the
 * `rag_search` tool (through the tools domain) and through chatbots.
 */
export function createRetrievalModule(deps: RetrievalModuleDeps) {
  const service = createRetrievalService({
    repo: createRetrievalRepository(deps.db, { oneSession: deps.oneSession }),
    collections: deps.collections,
    embeddings: deps.embeddings,
    settings: deps.settings,
    ...(deps.rerank ? { rerank: deps.rerank } : {}),
    ...(deps.rerankServes ? { rerankServes: deps.rerankServes } : {}),
  });
  return { service, tool: anyTool(ragSearchTool(service)) };
}
