import { once } from 'node:events';
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type {
  ChatCompletionChunk,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
} from 'openai/resources/chat/completions';
import { abortOnShutdown, shuttingDown } from '../http/abort.ts';
import { principalOf } from '../http/auth.ts';
import { renderError } from '../http/errors.ts';
import { asAppError } from './gateway.errors.ts';
import { chatCompletionRequest, chatCompletionResponse, modelList } from './gateway.schemas.ts';
import type { ChatStream, GatewayService } from './gateway.service.ts';
import type { Usage } from './providers/provider.ts';

const tags = ['chat'];

const usageChunk = (last: ChatCompletionChunk, usage: Usage) =>
  JSON.stringify({
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
  });

/**
 * Writes a started stream in the contract's SSE framing straight to the socket: one `data:`
 * event per chunk (the upstream's JSON as it came), errors in-band, always `[DONE]`.
 */
async function writeSse(
  res: ServerResponse,
  stream: ChatStream,
  includeUsage: boolean,
  shutdown: AbortSignal,
): Promise<void> {
  let last: ChatCompletionChunk | undefined;
  let usageSent = false;
  // Synchronous while the socket keeps up: `write` says whether to wait, so there is no promise
  // per event unless the client pushes back.
  const drained = () => Promise.race([once(res, 'drain'), once(res, 'close')]);
  const write = (frame: string) => !res.destroyed && !res.write(frame);
  try {
    for await (const { raw, chunk } of stream) {
      last = chunk;
      if (chunk.usage) {
        // We always ask upstreams for usage; a client that did not ask does not get that chunk.
        if (!includeUsage && (chunk.choices?.length ?? 0) === 0) continue;
        usageSent = includeUsage;
      }
      if (write(`data: ${raw}\n\n`)) await drained();
    }
    if (includeUsage && !usageSent && stream.usage !== undefined && last !== undefined) {
      if (write(`data: ${usageChunk(last, stream.usage)}\n\n`)) await drained();
    }
  } catch (error) {
    const reported = shutdown.aborted ? shuttingDown() : asAppError(error);
    write(`data: ${JSON.stringify(renderError(reported, 'structured'))}\n\n`);
  }
  if (!res.destroyed) res.end('data: [DONE]\n\n');
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
        abortOnShutdown(reply, controller);
        const options = { signal: controller.signal, caller };
        const body = request.body;
        // A request the shutdown deadline cut says so, rather than blaming the provider.
        const cut = (error: unknown) => {
          throw reply.server.shutdownSignal.aborted ? shuttingDown() : error;
        };
        if (body.stream === true) {
          const stream = await gateway
            .stream(body as unknown as ChatCompletionCreateParamsStreaming, options)
            .catch(cut);
          // From here on the socket is ours: headers already set (request id, rate limits) go first.
          void reply.hijack();
          reply.raw.writeHead(200, {
            ...(reply.getHeaders() as OutgoingHttpHeaders),
            'content-type': 'text/event-stream; charset=utf-8',
            'cache-control': 'no-cache',
            'x-accel-buffering': 'no',
          });
          await writeSse(reply.raw, stream, body.stream_options?.include_usage === true, reply.server.shutdownSignal);
          return reply;
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
  };
}
