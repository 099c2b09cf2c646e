import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { clientGone } from '../http/abort.ts';
import { principalOf } from '../http/auth.ts';
import { AppError } from '../http/errors.ts';
import type { Rerankers } from './rerank.ts';
import { MAX_TOTAL_CHARS } from '../embeddings/embeddings.schemas.ts';
import { rerankBody, rerankResponse, type RerankResponse } from './rerank.schemas.ts';

/** Cohere bills a search unit per query with up to 100 documents. */
const DOCUMENTS_PER_SEARCH_UNIT = 100;

export function rerankRoutes(rerankers: Rerankers) {
  return async (fastify: FastifyInstance) => {
    fastify.withTypeProvider<ZodTypeProvider>().post(
      '/api/v1/rerank',
      {
        config: { access: 'embeddings', family: 'structured' },
        schema: {
          operationId: 'createRerank',
          tags: ['embeddings'],
          description:
            'Orders documents by relevance to a query, in the shape Cohere, Jina, vLLM and LiteLLM clients use; served by the upstream providers that serve the model.',
          body: rerankBody,
          response: { 200: rerankResponse },
        },
      },
      async (request, reply): Promise<RerankResponse> => {
        const body = request.body;
        const texts = body.documents.map((d) => (typeof d === 'string' ? d : d.text));
        const chars = texts.reduce((n, t) => n + t.length, body.query.length);
        if (chars > MAX_TOTAL_CHARS) {
          throw new AppError({
            code: 'invalid_value',
            message: `documents are too large: at most ${MAX_TOTAL_CHARS} characters in total`,
            param: 'documents',
          });
        }
        const { results, totalTokens } = await rerankers.rerank(
          principalOf(request).keyId,
          { model: body.model, query: body.query, documents: texts, topN: body.top_n ?? texts.length },
          clientGone(reply),
        );
        return {
          id: `rerank-${randomUUID()}`,
          model: body.model,
          results: results.map(({ index, relevanceScore }) => {
            const given = body.documents[index] as string | { text: string };
            return {
              index,
              relevance_score: relevanceScore,
              ...(body.return_documents ? { document: typeof given === 'string' ? { text: given } : given } : {}),
            };
          }),
          usage: { total_tokens: totalTokens },
          meta: {
            billed_units: { search_units: Math.ceil(texts.length / DOCUMENTS_PER_SEARCH_UNIT) },
            tokens: { input_tokens: totalTokens, output_tokens: 0 },
          },
        };
      },
    );
  };
}
