import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type {
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
} from 'openai/resources/chat/completions';
import { clientGone, shuttingDown } from '../http/abort.ts';
import { principalOf } from '../http/auth.ts';
import { z } from 'zod';
import { chatCompletionRequest, chatCompletionResponse, modelEntry, modelList } from './gateway.schemas.ts';
import type { GatewayService } from './gateway.service.ts';
import { sendChatStream } from '../http/sse.reply.ts';

const tags = ['chat'];

export function gatewayRoutes(gateway: GatewayService) {
  return async (fastify: FastifyInstance) => {
    const app = fastify.withTypeProvider<ZodTypeProvider>();

    app.post(
      '/api/v1/chat/completions',
      {
        config: { access: 'chat', family: 'structured' },
        schema: {
          operationId: 'createChatCompletion',
          tags,
          body: chatCompletionRequest,
          response: { 200: chatCompletionResponse },
        },
      },
      async (request, typedReply) => {
        // The 200 body is documented as a chat.completion but sent as the upstream's bytes or a stream.
        const reply = typedReply as unknown as FastifyReply;
        const principal = principalOf(request);
        const caller = { keyId: principal.keyId, tokensPerMonth: principal.quota.tokensPerMonth };
        // The client going away aborts the upstream request at once, streamed or not.
        const options = { signal: clientGone(reply), caller };
        const body = request.body;
        // A request the shutdown deadline cut says so, rather than blaming the provider.
        const cut = (error: unknown) => {
          throw reply.server.shutdownSignal.aborted ? shuttingDown() : error;
        };
        if (body.stream === true) {
          const stream = await gateway
            .stream(body as unknown as ChatCompletionCreateParamsStreaming, options)
            .catch(cut);
          return sendChatStream(reply, stream, body.stream_options?.include_usage === true);
        }
        const result = await gateway
          .complete(body as unknown as ChatCompletionCreateParamsNonStreaming, options)
          .catch(cut);
        // The upstream's bytes, unchanged: a string with a JSON type skips serialization.
        return reply.type('application/json; charset=utf-8').send(result.body);
      },
    );

    app.get(
      '/api/v1/models',
      {
        config: { access: 'read', family: 'structured' },
        schema: { operationId: 'listModels', tags, response: { 200: modelList } },
      },
      async () => ({ object: 'list' as const, data: await gateway.models() }),
    );

    // What the OpenAI SDKs' models.retrieve(id) asks; ids may hold slashes (`org/model`), which
    // the SDKs put in the path as they are, hence the wildcard.
    app.get(
      '/api/v1/models/*',
      {
        config: { access: 'read', family: 'structured', wildcardParam: 'model' },
        schema: {
          operationId: 'retrieveModel',
          tags,
          description: 'One model of `GET /api/v1/models` by its id (which may contain slashes).',
          params: z.object({ '*': z.string().describe('The model id') }),
          response: { 200: modelEntry },
        },
      },
      async (request) => gateway.model(request.params['*']),
    );
  };
}
