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

/**
 * The API's own path, and the path Cohere's v2 SDK (`cohere.ClientV2`, the SDKs' current client)
 * builds from a base URL: `{base_url}/v2/rerank`. With `base_url` = `…/api`, Cohere's v1 client
 * reaches `/api/v1/rerank` and its v2 client `/api/v2/rerank`; both are the same operation.
 */
const PATHS = [
  { url: '/api/v1/rerank', operationId: 'createRerank', client: '' },
  {
    url: '/api/v2/rerank',
    operationId: 'createRerankV2',
    client: " The same operation at the path Cohere's v2 SDK calls (`base_url` …/api).",
  },
] as const;

export function rerankRoutes(rerankers: Rerankers) {
  return async (fastify: FastifyInstance) => {
    for (const { url, operationId, client } of PATHS) {
      fastify.withTypeProvider<ZodTypeProvider>().post(
        url,
        {
          config: { access: 'embeddings', family: 'structured' },
          schema: {
            operationId,
            tags: ['embeddings'],
            description:
              "Orders documents by relevance to a query, in the shape Cohere, Jina, vLLM and LiteLLM clients use; served by the upstream providers that serve the model. Tokens count toward the calling key's quota.tokens_per_month, which refuses the call (403 quota_exceeded) once reached." +
              client,
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
          const principal = principalOf(request);
          const { results, totalTokens } = await rerankers.rerankFor(
            { keyId: principal.keyId, tokensPerMonth: principal.quota.tokensPerMonth },
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
                ...(body.return_documents !== false
                  ? { document: typeof given === 'string' ? { text: given } : given }
                  : {}),
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
    }
  };
}
