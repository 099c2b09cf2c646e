import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { randomBase62 } from '../db/ids.ts';
import type { ChatStream } from '../gateway/gateway.service.ts';
import type { StreamEvent } from '../gateway/providers/provider.ts';
import { AppError } from '../errors.ts';

/**
 * What a fallback response stands in for: the provider failed after retries and failover (5xx,
 * unreachable, timeout). An upstream's 4xx, a quota or an unknown model is the caller's to see.
 */
export const providerFailed = (error: unknown): error is AppError =>
  error instanceof AppError && (error.code === 'upstream_error' || error.code === 'upstream_timeout');

const completionId = () => `chatcmpl-fallback-${randomBase62(20)}`;
const now = () => Math.floor(Date.now() / 1000);

/** A chat.completion carrying a fallback response, marked by `finish_reason: "fallback"`. */
export function fallbackCompletion(model: string, content: string) {
  return {
    id: completionId(),
    object: 'chat.completion' as const,
    created: now(),
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'fallback', logprobs: null }],
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  };
}

/** The same as a stream: the text in one delta, then `finish_reason: "fallback"`. */
export function fallbackStream(model: string, content: string): ChatStream {
  const base = { id: completionId(), object: 'chat.completion.chunk', created: now(), model };
  const chunks = [
    { ...base, choices: [{ index: 0, delta: { role: 'assistant', content }, finish_reason: null }] },
    { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'fallback' }] },
  ];
  return {
    provider: 'fallback',
    usage: { promptTokens: 0, completionTokens: 0 },
    async *[Symbol.asyncIterator]() {
      for (const chunk of chunks) yield { raw: JSON.stringify(chunk), chunk: chunk as unknown as ChatCompletionChunk };
    },
  };
}

/** The stream with `sources` added to its first chunk that carries choices; everything else as it came. */
export function withSources(stream: ChatStream, sources: readonly unknown[] | undefined): ChatStream {
  if (sources === undefined) return stream;
  return {
    get provider() {
      return stream.provider;
    },
    get usage() {
      return stream.usage;
    },
    async *[Symbol.asyncIterator](): AsyncGenerator<StreamEvent> {
      let pending = true;
      for await (const event of stream) {
        if (pending && (event.chunk.choices?.length ?? 0) > 0) {
          pending = false;
          yield { raw: JSON.stringify({ ...event.chunk, sources }), chunk: event.chunk };
        } else {
          yield event;
        }
      }
    },
  };
}
