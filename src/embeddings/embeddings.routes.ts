import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { clientGone } from '../http/abort.ts';
import { principalOf } from '../http/auth.ts';
import { embeddingsBody, embeddingsResponse } from './embeddings.schemas.ts';
import type { EmbeddingsService } from './embeddings.service.ts';

export function embeddingsRoutes(embeddings: EmbeddingsService) {
  return async (fastify: FastifyInstance) => {
    fastify.withTypeProvider<ZodTypeProvider>().post(
      '/api/v1/embeddings',
      {
        config: { access: 'embeddings', family: 'structured' },
        schema: {
          operationId: 'createEmbeddings',
          tags: ['embeddings'],
          description:
            "OpenAI-compatible embeddings. A local model by its name, else a model an upstream provider serves (retries and failover as for chat), else OpenAI names are aliases of the local default model; the same resolution as a collection's embedding_model. Tokens count toward the key's quota.tokens_per_month, which refuses the call (403 quota_exceeded) once reached. The header x-ragport-embedding-model names the model that computed them.",
          body: embeddingsBody,
          response: { 200: embeddingsResponse },
        },
      },
      async (request, reply) => {
        const { response, resolvedModel } = await embeddings.create(
          principalOf(request),
          request.body,
          clientGone(reply),
        );
        return reply.header('x-ragport-embedding-model', resolvedModel).send(response);
      },
    );
  };
}
