import { z } from 'zod';
import type { Tool } from '../tools/tool.types.ts';
import type { RetrievalService, SearchResult } from './retrieval.service.ts';

const parameters = z.object({
  query: z.string().trim().min(1).max(10_000),
  collection: z.string().min(1).max(200),
  top_k: z.number().int().min(1).max(100).default(5),
  similarity_threshold: z.number().min(-1).max(1).default(0.5),
  filters: z.record(z.string(), z.unknown()).optional(),
  mode: z.enum(['dense', 'keyword', 'hybrid']).default('hybrid'),
});

const result = z.object({
  results: z.array(
    z.object({
      document_id: z.string(),
      score: z.number().describe('Cosine similarity between the query and the chunk'),
      content: z.string(),
      metadata: z.looseObject({ title: z.string(), path: z.string() }),
    }),
  ),
});

export function ragSearchTool(
  retrieval: RetrievalService,
): Tool<z.infer<typeof parameters>, { results: SearchResult[] }> {
  return {
    name: 'rag_search',
    description: 'hybrid BM25 + vector search over a collection',
    parameters,
    result,
    enabled: () => true,
    run: async (p, { principal, signal }) => ({
      results: await retrieval.search(
        principal,
        {
          query: p.query,
          collection: p.collection,
          topK: p.top_k,
          threshold: p.similarity_threshold,
          filters: p.filters,
          mode: p.mode,
        },
        signal,
      ),
    }),
  };
}
