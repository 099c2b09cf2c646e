import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
} from 'openai/resources/chat/completions';

/** Why an upstream call failed, as the reliability layer needs to know it. */
/** `unavailable`: no provider was called, every one serving the model having its breaker open. */
export type FailureKind = 'connection' | 'timeout' | 'status' | 'protocol' | 'aborted' | 'unavailable';

export interface UpstreamFailureInit {
  kind: FailureKind;
  provider: string;
  message: string;
  status?: number;
  /** The upstream's own `error.code` / `error.type`, passed through on 4xx. */
  code?: string;
  type?: string;
  /** The request field the upstream blamed (OpenAI's `error.param`), passed through on 4xx. */
  param?: string;
  retryAfterMs?: number;
  /** Reported by an `{"error": ...}` event of a stream that had answered 200. */
  inBand?: boolean;
  cause?: unknown;
}

/** A failed upstream call: the outcome adapters report, mapped to HTTP at the edge. */
export class UpstreamFailure extends Error {
  readonly kind: FailureKind;
  readonly provider: string;
  readonly status: number | undefined;
  readonly code: string | undefined;
  readonly type: string | undefined;
  readonly param: string | undefined;
  readonly retryAfterMs: number | undefined;
  readonly inBand: boolean;
  /**
   * Set when the call ended with every provider's circuit breaker open: how long until the first
   * of them takes a trial request again.
   */
  availableInMs: number | undefined;

  constructor(init: UpstreamFailureInit) {
    super(init.message, { cause: init.cause });
    this.name = 'UpstreamFailure';
    this.kind = init.kind;
    this.provider = init.provider;
    this.status = init.status;
    this.code = init.code;
    this.type = init.type;
    this.param = init.param;
    this.retryAfterMs = init.retryAfterMs;
    this.inBand = init.inBand ?? false;
  }
}

const timeoutCodes = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/**
 * Maps what a provider call threw to a failure: an abort by our own signal is `aborted`, the
 * HTTP client's (undici's) timeouts are `timeout`, anything else `connection`. Used by every
 * adapter and by the reliability layer around them, so it lives beside UpstreamFailure.
 */
export function failureFrom(provider: string, error: unknown, signal?: AbortSignal): UpstreamFailure {
  if (error instanceof UpstreamFailure) return error;
  const code = (error as { code?: unknown }).code;
  let kind: FailureKind = 'connection';
  if (signal?.aborted === true || code === 'UND_ERR_ABORTED' || (error as Error).name === 'AbortError')
    kind = 'aborted';
  else if (typeof code === 'string' && timeoutCodes.has(code)) kind = 'timeout';
  const reason = error instanceof Error ? error.message : String(error);
  const message =
    kind === 'timeout'
      ? `Provider ${provider} timed out`
      : kind === 'aborted'
        ? 'Request aborted'
        : `Provider ${provider} is unreachable: ${reason}`;
  return new UpstreamFailure({ kind, provider, message, cause: error });
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
}

/**
 * A token count an upstream reported, if it is one: a non-negative safe integer. Anything else
 * (1.5, -1000, 1e300, a string) is the upstream's bug; taken as is it would lower a key's quota
 * use or fail the usage write of every key counted with it, so callers count the tokens themselves.
 */
export function tokenCount(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

/** A non-streamed completion: the upstream's bytes (passed through as they are) and their parse. */
export interface RawCompletion {
  body: string;
  completion: ChatCompletion;
}

/** One streamed event: the upstream's JSON text (forwarded as is) and its parse. */
export interface StreamEvent {
  raw: string;
  chunk: ChatCompletionChunk;
}

export interface UpstreamModel {
  id: string;
  created: number;
}

/** What an embeddings call asks beyond the inputs: `dimensions` goes to the provider as OpenAI's API names it. */
export interface EmbedRequestOptions {
  dimensions?: number;
  /** Fields of the client's request passed on as sent; `model`, `input` and the format are ragport's. */
  extra?: Record<string, unknown>;
}

/** What a provider's /embeddings answered: one vector per input, in input order. */
export interface ProviderEmbeddings {
  vectors: number[][];
  promptTokens: number;
}

/** One reranked document: its index in the request's documents and the upstream's score. */
export interface RerankItem {
  index: number;
  relevanceScore: number;
}

export interface RerankResult {
  /** Best first. */
  results: RerankItem[];
  /** Tokens the upstream reports (`usage.total_tokens`, or Cohere's `meta.billed_units.input_tokens`); 0 if none. */
  totalTokens: number;
}

/** What the gateway needs of an upstream. Adapters live in `providers/<name>/`. */
export interface ChatProvider {
  readonly name: string;
  /** Longest batch of inputs one embeddings call may carry. */
  readonly embeddingBatchSize: number;
  complete(params: ChatCompletionCreateParamsNonStreaming, signal?: AbortSignal): Promise<RawCompletion>;
  /** Resolves once the upstream accepted the request; events (and in-band failures) follow. */
  stream(params: ChatCompletionCreateParamsStreaming, signal?: AbortSignal): Promise<AsyncGenerator<StreamEvent>>;
  embed(
    model: string,
    inputs: string[],
    signal?: AbortSignal,
    options?: EmbedRequestOptions,
  ): Promise<ProviderEmbeddings>;
  /** POST {base_url}/rerank in the Jina/Cohere/vLLM shape: `model`, `query`, `documents`, `top_n`. */
  rerank(model: string, query: string, documents: string[], topN: number, signal?: AbortSignal): Promise<RerankResult>;
  listModels(signal?: AbortSignal): Promise<UpstreamModel[]>;
  close(): Promise<void>;
}
