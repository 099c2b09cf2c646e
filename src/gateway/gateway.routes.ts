import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type {
  ChatCompletionChunk,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
} from 'openai/resources/chat/completions';
import { principalOf } from '../http/auth.ts';
import { renderError } from '../http/errors.ts';
import { asAppError } from './gateway.errors.ts';
import { chatCompletionRequest, chatCompletionResponse, modelList } from './gateway.schemas.ts';
import type { ChatStream, GatewayService } from './gateway.service.ts';

const tags = ['chat'];

/** The contract's SSE framing: one `data:` event per chunk, errors in-band, always `[DONE]`. */
async function* sseFrames(stream: ChatStream, includeUsage: boolean): AsyncGenerator<string> {
  let last: ChatCompletionChunk | undefined;
  let usageSent = false;
  try {
    for await (const { raw, chunk } of stream) {
      last = chunk;
      if (chunk.usage) {
        // We always ask upstreams for usage; a client that did not ask does not get that chunk.
        if (!includeUsage && (chunk.choices?.length ?? 0) === 0) continue;
        usageSent = includeUsage;
      }
      yield `data: ${raw}\n\n`;
    }
    const usage = stream.usage;
    if (includeUsage && !usageSent && usage !== undefined && last !== undefined) {
      const counted = {
        id: last.id,
        object: 'chat.completion.chunk',
        created: last.created,
        model: last.model,
        choices: [],
        usage: {
          prompt_tokens: usage.promptTokens,
          completion_tokens: usage.completionTokens,
          total_tokens: usage.promptTokens + usage.completionTokens,
        },
      };
      yield `data: ${JSON.stringify(counted)}\n\n`;
    }
  } catch (error) {
    yield `data: ${JSON.stringify(renderError(asAppError(error), 'structured'))}\n\n`;
  }
  yield 'data: [DONE]\n\n';
}

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
        const controller = new AbortController();
        reply.raw.once('close', () => {
          if (!reply.raw.writableFinished) controller.abort();
        });
        const options = { signal: controller.signal, caller };
        const body = request.body;
        if (body.stream === true) {
          const stream = await gateway.stream(body as unknown as ChatCompletionCreateParamsStreaming, options);
          const includeUsage = body.stream_options?.include_usage === true;
          return reply
            .header('content-type', 'text/event-stream; charset=utf-8')
            .header('cache-control', 'no-cache')
            .header('x-accel-buffering', 'no')
            .send(Readable.from(sseFrames(stream, includeUsage), { objectMode: false }));
        }
        const result = await gateway.complete(body as unknown as ChatCompletionCreateParamsNonStreaming, options);
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
  };
}
