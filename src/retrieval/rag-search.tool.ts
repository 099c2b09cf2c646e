import { z } from 'zod';
import type { Tool } from '../tools/tool.types.ts';
import type { RetrievalService, RetrievedChunk } from './retrieval.service.ts';

const MAX_WEIGHT = 10;
/**
 * 0, or from 1e-6: a smaller weight is no weight, and 5e-324 made the fused score underflow in
 * PostgreSQL (a 500 for a request the schema had accepted).
 */
const MIN_WEIGHT = 1e-6;
const fusionWeight = z
  .number()
  .min(0)
  .max(MAX_WEIGHT)
  .refine((w) => w === 0 || w >= MIN_WEIGHT, `a weight is 0 or at least ${MIN_WEIGHT}`);
const MAX_RERANK_CANDIDATES = 200;

const parameters = z.object({
  query: z.string().trim().min(1).max(10_000),
  collection: z.string().min(1).max(200),
  top_k: z.number().int().min(1).max(100).default(5),
  similarity_threshold: z.number().min(-1).max(1).default(0.5),
  filters: z.record(z.string(), z.unknown()).optional(),
  mode: z.enum(['dense', 'keyword', 'hybrid']).default('hybrid'),
  weights: z
    .object({
      dense: fusionWeight.optional(),
      keyword: fusionWeight.optional(),
    })
    .strict()
    .refine((w) => !(w.dense === 0 && w.keyword === 0), 'weights must not both be 0')
    .optional()
    .describe('Fusion weights of the two legs in hybrid mode (0-10 each); the configured ones where absent'),
  rerank: z
    .object({
      model: z.string().min(1).max(200).describe('A rerank model a provider serves'),
      candidates: z.number().int().min(1).max(MAX_RERANK_CANDIDATES).default(50),
    })
    .strict()
    .optional()
    .describe('Rerank the best `candidates` fused results, then keep top_k'),
});

const breakdown = z.object({
  dense: z.number().describe('Cosine similarity of query and chunk (what similarity_threshold applies to)'),
  keyword: z.number().optional().describe('BM25 of the chunk (keyword and hybrid modes)'),
  fused: z.number().optional().describe('Fusion of both legs (hybrid mode)'),
  rerank: z.number().optional().describe("The reranker's relevance score (with rerank)"),
});

const result = z.object({
  results: z.array(
    z.object({
      document_id: z.string(),
      score: z
        .number()
        .describe(
          'Cosine similarity of query and chunk (what similarity_threshold applies to); results are ordered by scores.rerank, else scores.fused, else the single leg',
        ),
      content: z.string(),
      metadata: z.looseObject({ title: z.string(), path: z.string() }),
      scores: breakdown,
    }),
  ),
});

export function ragSearchTool(
  retrieval: RetrievalService,
): Tool<z.infer<typeof parameters>, { results: RetrievedChunk[] }> {
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
          weights: p.weights,
          rerank: p.rerank,
        },
        signal,
      ),
    }),
  };
}
