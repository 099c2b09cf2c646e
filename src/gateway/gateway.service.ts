import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParams,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
} from 'openai/resources/chat/completions';
import type { Logger } from 'pino';
import { AppError } from '../errors.ts';
import { expectedTokens, type TokenQuota } from '../usage/quota.ts';
import type { UsageRecorder } from '../usage/usage.recorder.ts';
import { asAppError } from './gateway.errors.ts';
import { tokenCount, UpstreamFailure, type StreamEvent, type Usage } from './providers/provider.ts';
import type { Registry } from './registry.ts';
import { failoverContext, withFailover, type Candidate, type RetryPolicy } from './reliability.ts';
import { countPromptTokens, countTextTokens } from './tokens.ts';

/** Who is calling, for quotas and usage accounting. */
export interface Caller {
  keyId: string;
  tokensPerMonth: number | null;
}

export interface CallOptions {
  signal?: AbortSignal;
  caller?: Caller;
}

export interface CompletionResult {
  /** The upstream's JSON, unchanged. */
  body: string;
  completion: ChatCompletion;
  provider: string;
  usage: Usage;
}

/** A started stream: iterate for events; `usage` is known once the iteration ended. */
export interface ChatStream extends AsyncIterable<StreamEvent> {
  readonly provider: string;
  readonly usage: Usage | undefined;
}

export interface GatewayServiceDeps {
  registry: Registry;
  retry: RetryPolicy;
  usage: UsageRecorder;
  quota: TokenQuota;
  logger: Logger;
  /** Told of every failed upstream call, mid-stream failures included (metrics). */
  onUpstreamFailure?: (failure: UpstreamFailure) => void;
}

/**
 * What a call is expected to take, for the token quota's reservation before the model answers: its
 * messages' text, and the reply's room when the caller bounds it.
 */
function expectedCallTokens(params: ChatCompletionCreateParams): number {
  let characters = 0;
  for (const message of params.messages) {
    const content = message.content;
    if (typeof content === 'string') characters += content.length;
    else if (Array.isArray(content)) {
      for (const part of content) if ('text' in part && typeof part.text === 'string') characters += part.text.length;
    }
  }
  const reply = params.max_completion_tokens ?? params.max_tokens ?? 0;
  return expectedTokens(characters) + reply * (params.n ?? 1);
}

function completionText(completion: ChatCompletion): string[] {
  const texts: string[] = [];
  for (const choice of completion.choices) {
    if (typeof choice?.message?.content === 'string') texts.push(choice.message.content);
    if (choice?.message?.tool_calls) texts.push(JSON.stringify(choice.message.tool_calls));
  }
  return texts;
}

/** The text a chunk adds, for counting; an upstream's odd chunk (no choices array) adds none. */
function collectDelta(chunk: ChatCompletionChunk, texts: string[]): void {
  if (!Array.isArray(chunk.choices)) return;
  for (const choice of chunk.choices) {
    const delta = choice?.delta;
    if (typeof delta?.content === 'string') texts.push(delta.content);
    if (!Array.isArray(delta?.tool_calls)) continue;
    for (const call of delta.tool_calls) {
      if (typeof call?.function?.arguments === 'string') texts.push(call.function.arguments);
    }
  }
}

/**
 * The upstream's usage, when it gave one that holds: a count that is not a non-negative integer
 * makes ragport count both itself (a missing one is 0, as before).
 */
function fromUpstream(usage: ChatCompletion['usage'] | null | undefined): Usage | undefined {
  if (typeof usage !== 'object' || usage === null) return undefined;
  const promptTokens = tokenCount(usage.prompt_tokens ?? 0);
  const completionTokens = tokenCount(usage.completion_tokens ?? 0);
  return promptTokens === undefined || completionTokens === undefined ? undefined : { promptTokens, completionTokens };
}

/**
 * Chat completions through the configured providers, with retries, failover, quotas and usage
 * accounting. The route and the chatbots both call this.
 */
export function createGatewayService({ registry, retry, usage, quota, logger, onUpstreamFailure }: GatewayServiceDeps) {
  /** An unknown chat model; with no chat provider at all, the hint says what to configure. */
  const modelNotFound = (model: string) =>
    new AppError({
      code: 'model_not_found',
      message: `The model '${model}' does not exist${
        registry.hasChatProviders()
          ? ''
          : ': no chat provider is configured (set OPENAI_API_KEY, or list providers in the RAGPORT_CONFIG file)'
      }`,
      param: 'model',
    });

  /**
   * Providers for the model, after the token quota admitted the call (counted in flight until
   * `release`): both before any upstream call.
   */
  const prepare = async (
    params: ChatCompletionCreateParams,
    caller: Caller | undefined,
  ): Promise<{ candidates: Candidate[]; release: () => void }> => {
    const candidates = await registry.candidates(params.model, 'chat');
    if (candidates.length === 0) throw modelNotFound(params.model);
    const release =
      caller?.tokensPerMonth == null
        ? () => undefined
        : await quota.admitCall(caller.keyId, caller.tokensPerMonth, expectedCallTokens(params));
    return { candidates, release };
  };

  const record = (caller: Caller | undefined, model: string, used: Usage) => {
    if (caller !== undefined) usage.record({ keyId: caller.keyId, model, ...used });
  };

  const context = (model: string, signal: AbortSignal | undefined) =>
    failoverContext({ retry, logger, onFailure: onUpstreamFailure }, model, signal);

  return {
    async complete(
      params: ChatCompletionCreateParamsNonStreaming,
      options: CallOptions = {},
    ): Promise<CompletionResult> {
      const { signal, caller } = options;
      const { candidates, release } = await prepare(params, caller);
      try {
        const target = registry.target(params.model);
        const upstreamParams = target === params.model ? params : { ...params, model: target };
        let provider = '';
        let raw;
        try {
          raw = await withFailover(
            candidates,
            (p) => {
              provider = p.name;
              return p.complete(upstreamParams, signal);
            },
            context(params.model, signal),
          );
        } catch (error) {
          throw asAppError(error);
        }
        const used = fromUpstream(raw.completion.usage) ?? {
          promptTokens: await countPromptTokens(params.messages),
          completionTokens: await countTextTokens(completionText(raw.completion)),
        };
        record(caller, params.model, used);
        return { body: raw.body, completion: raw.completion, provider, usage: used };
      } finally {
        release();
      }
    },

    /**
     * Starts a stream: resolves once the upstream sent its first event, so that everything
     * before that (errors, retries, failover) happens before the client sees a byte. Failures
     * after that surface from the iteration as AppErrors.
     */
    async stream(params: ChatCompletionCreateParamsStreaming, options: CallOptions = {}): Promise<ChatStream> {
      const { signal, caller } = options;
      const { candidates, release } = await prepare(params, caller);
      const upstreamParams: ChatCompletionCreateParamsStreaming = {
        ...params,
        model: registry.target(params.model),
        stream: true,
        stream_options: { ...params.stream_options, include_usage: true },
      };
      let opened;
      try {
        opened = await withFailover(
          candidates,
          async (p) => {
            const events = await p.stream(upstreamParams, signal);
            return { provider: p.name, events, first: await events.next() };
          },
          context(params.model, signal),
        );
      } catch (error) {
        release();
        throw asAppError(error);
      }
      const { events, first } = opened;
      let final: Usage | undefined;

      async function* iterate(): AsyncGenerator<StreamEvent> {
        let reported: Usage | undefined;
        const texts: string[] = [];
        try {
          for (let step = first; step.done !== true; step = await events.next()) {
            const event = step.value;
            if (event.chunk.usage) reported = fromUpstream(event.chunk.usage) ?? reported;
            collectDelta(event.chunk, texts);
            yield event;
          }
        } catch (error) {
          if (error instanceof UpstreamFailure && !(error.kind === 'aborted' && signal?.aborted === true)) {
            onUpstreamFailure?.(error);
          }
          throw asAppError(error);
        } finally {
          await events.return(undefined);
          // Aborted or failed streams count what was sent; the upstream's figures win when given.
          final = reported ?? {
            promptTokens: await countPromptTokens(params.messages),
            completionTokens: await countTextTokens(texts),
          };
          record(caller, params.model, final);
          release();
        }
      }

      return {
        provider: opened.provider,
        get usage() {
          return final;
        },
        [Symbol.asyncIterator]: iterate,
      };
    },

    models: () => registry.models(),
    /** One model of the list, or model_not_found said as chat says it. */
    async model(id: string) {
      const found = (await registry.models()).find((m) => m.id === id);
      if (found !== undefined) return found;
      throw modelNotFound(id);
    },
  };
}

export type GatewayService = ReturnType<typeof createGatewayService>;
