import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { listenWithAcceptors } from '../../src/http/acceptors.ts';
import { until } from './poll.ts';

/**
 * An OpenAI-compatible upstream for tests and benchmarks: chat completions (plain and SSE),
 * /v1/models, /v1/embeddings, /v1/rerank (Jina's or Cohere's response shape), with latency, token pacing, injected faults, and a record of
 * what it received (including whether the client aborted).
 */

export type Fault =
  | { kind: 'status'; status: number; message?: string; code?: string; retryAfter?: number }
  /** Accepts the request and never answers. */
  | { kind: 'hang' }
  /** Destroys the connection before answering. */
  | { kind: 'reset' }
  /** Streams `afterChunks` chunks, then destroys the connection. */
  | { kind: 'reset-mid-stream'; afterChunks: number }
  /** Streams `afterChunks` chunks, then an event that is not JSON (a plain completion: a truncated body). */
  | { kind: 'malformed-sse'; afterChunks: number }
  /** Streams `afterChunks` chunks, then `data: {"error": ...}`. */
  | { kind: 'error-event'; afterChunks: number; message?: string }
  /** Answers with exactly this body (a broken provider's bytes: any JSON, SSE or HTML). */
  | { kind: 'body'; body: string; status?: number; contentType?: string };

export interface MockUpstreamOptions {
  host?: string;
  port?: number;
  /**
   * Listening sockets (see src/http/acceptors.ts); the gateway bench gives the mock several, as a
   * real provider's front end has, so that its own accept rate is not what a burst measures.
   */
  acceptors?: number;
  /** Ids listed by /v1/models and accepted by the endpoints. */
  models?: string[];
  /** Delay before the response headers. */
  latencyMs?: number;
  /** Stream pacing; 0 sends every chunk at once. */
  tokensPerSecond?: number;
  completionTokens?: number;
  /** false: never report usage (the gateway then counts with its tokenizer). */
  usage?: boolean;
  embeddingDimensions?: number;
  /**
   * `hash` (default): a vector from a hash of the whole text, unrelated to its meaning. `words`:
   * each word adds one to a hashed component, so texts sharing words are close by cosine (dense
   * search finds what it should).
   */
  embeddingKind?: 'hash' | 'words';
  /** Larger embedding batches are refused with 400, as real upstreams do. */
  maxEmbeddingBatch?: number;
  /** When set, requests without `Authorization: Bearer <apiKey>` get 401. */
  apiKey?: string;
  /** false for benchmarks: keep no per-request record. */
  record?: boolean;
  /** Status for GET /v1/models (e.g. 500 to play a provider that is down). */
  modelsStatus?: number;
  /**
   * /v1/rerank answers as Jina (and vLLM) do: `{model, usage: {total_tokens}, results: [{index,
   * document: {text}, relevance_score}]}`; or as Cohere v2: `{id, results: [{index,
   * relevance_score}], meta: {api_version, billed_units: {search_units}}}`, with no token count.
   */
  rerankFormat?: 'jina' | 'cohere';
  /** The assistant's text for a chat request; default `completionTokens` words `w0 w1 …`. Streams send it word by word. */
  reply?: (body: Record<string, unknown>) => string;
  /**
   * Models that refuse `max_tokens` and any `temperature` but 1 with OpenAI's own 400s (its
   * reasoning models: o1, o3, gpt-5, …), naming the parameter in `param`.
   */
  reasoningModels?: string[];
}

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown> | undefined;
  /** The client closed the connection before the response was complete. */
  aborted: boolean;
  finished: boolean;
  /** Every byte of the response body the mock wrote. */
  sent: string;
}

export interface MockUpstream {
  /** Base URL including `/v1`, as providers are configured. */
  readonly url: string;
  readonly port: number;
  readonly requests: ReceivedRequest[];
  options: Required<
    Omit<MockUpstreamOptions, 'host' | 'port' | 'acceptors' | 'apiKey' | 'maxEmbeddingBatch' | 'reply'>
  > &
    Pick<MockUpstreamOptions, 'apiKey' | 'maxEmbeddingBatch' | 'reply'>;
  /** The next `times` POST requests suffer this fault. */
  inject(fault: Fault, times?: number): void;
  /** POST requests received on this path so far. */
  count(path: string): number;
  /** Polls until the predicate holds (no fixed sleeps in tests). */
  waitFor(predicate: () => boolean, timeoutMs?: number): Promise<void>;
  reset(): void;
  close(): Promise<void>;
}

const wordsIn = (value: unknown): number => {
  if (typeof value === 'string') return value.split(/\s+/).filter(Boolean).length;
  if (Array.isArray(value)) return value.reduce((n: number, part) => n + wordsIn((part as { text?: unknown }).text), 0);
  return 0;
};

function promptTokens(body: Record<string, unknown>): number {
  const messages = Array.isArray(body.messages) ? (body.messages as { content?: unknown }[]) : [];
  return messages.reduce((n, m) => n + wordsIn(m.content), 0);
}

const token = (i: number) => `w${i} `;

/** What OpenAI answers a reasoning model's request that sets `max_tokens` or a temperature but 1. */
function reasoningRefusal(body: Record<string, unknown>): { message: string; param: string; code: string } | undefined {
  if (body.max_tokens != null) {
    return {
      message:
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
      param: 'max_tokens',
      code: 'unsupported_parameter',
    };
  }
  if (body.temperature != null && body.temperature !== 1) {
    return {
      message: `Unsupported value: 'temperature' does not support ${JSON.stringify(body.temperature)} with this model. Only the default (1) value is supported.`,
      param: 'temperature',
      code: 'unsupported_value',
    };
  }
  return undefined;
}

/** The reply as stream deltas: the custom text word by word (spaces kept), or the `w<i> ` tokens. */
function replyPieces(settings: MockUpstream['options'], body: Record<string, unknown>): string[] {
  if (settings.reply === undefined) return Array.from({ length: settings.completionTokens }, (_, i) => token(i));
  return settings.reply(body).match(/\S+\s*|\s+/g) ?? [''];
}

const hashOf = (text: string): number => {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return h >>> 0;
};

function wordVectorFor(text: string, dimensions: number): Float32Array {
  const vector = new Float32Array(dimensions);
  for (const word of text.toLowerCase().match(/[a-z0-9]+/g) ?? []) {
    const at = hashOf(word) % dimensions;
    vector[at] = (vector[at] ?? 0) + 1;
  }
  return vector;
}

function vectorFor(text: string, dimensions: number): Float32Array {
  const vector = new Float32Array(dimensions);
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  for (let j = 0; j < dimensions; j++) vector[j] = (((h >>> (j % 24)) & 0xff) - 128) / 128;
  return vector;
}

export async function startMockUpstream(options: MockUpstreamOptions = {}): Promise<MockUpstream> {
  const settings: MockUpstream['options'] = {
    models: options.models ?? ['mock-chat', 'mock-embed'],
    latencyMs: options.latencyMs ?? 0,
    tokensPerSecond: options.tokensPerSecond ?? 0,
    completionTokens: options.completionTokens ?? 5,
    usage: options.usage ?? true,
    embeddingDimensions: options.embeddingDimensions ?? 8,
    embeddingKind: options.embeddingKind ?? 'hash',
    record: options.record ?? true,
    modelsStatus: options.modelsStatus ?? 200,
    apiKey: options.apiKey,
    maxEmbeddingBatch: options.maxEmbeddingBatch,
    reply: options.reply,
    rerankFormat: options.rerankFormat ?? 'jina',
    reasoningModels: options.reasoningModels ?? [],
  };
  const requests: ReceivedRequest[] = [];
  const faults: Fault[] = [];
  let sequence = 0;

  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      ...headers,
    });
    res.end(text);
  };
  const error = (res: ServerResponse, status: number, message: string, code?: string, headers = {}) =>
    json(
      res,
      status,
      { error: { message, type: status === 429 ? 'rate_limit_error' : 'invalid_request_error', code: code ?? null } },
      headers,
    );

  const applyFault = (fault: Fault, res: ServerResponse): boolean => {
    switch (fault.kind) {
      case 'status':
        error(
          res,
          fault.status,
          fault.message ?? `mock failure ${fault.status}`,
          fault.code,
          fault.retryAfter === undefined ? {} : { 'retry-after': String(fault.retryAfter) },
        );
        return true;
      case 'hang':
        return true;
      case 'reset':
        res.socket?.destroy();
        return true;
      case 'body':
        res.writeHead(fault.status ?? 200, { 'content-type': fault.contentType ?? 'application/json' });
        res.end(fault.body);
        return true;
      default:
        return false;
    }
  };

  const stream = (res: ServerResponse, body: Record<string, unknown>, fault: Fault | undefined) => {
    const id = `chatcmpl-mock-${++sequence}`;
    const created = Math.floor(Date.now() / 1000);
    const model = String(body.model);
    const pieces = replyPieces(settings, body);
    const n = pieces.length;
    const includeUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
    const frame = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices, ...extra })}\n\n`;
    const events: string[] = [];
    for (let i = 0; i < n; i++) {
      const delta = i === 0 ? { role: 'assistant', content: pieces[i] } : { content: pieces[i] };
      events.push(frame([{ index: 0, delta, finish_reason: null }]));
    }
    events.push(frame([{ index: 0, delta: {}, finish_reason: 'stop' }]));
    if (includeUsage && settings.usage) {
      const prompt = promptTokens(body);
      events.push(frame([], { usage: { prompt_tokens: prompt, completion_tokens: n, total_tokens: prompt + n } }));
    }
    events.push('data: [DONE]\n\n');
    const cut = fault !== undefined && 'afterChunks' in fault ? fault.afterChunks : -1;

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const interval = settings.tokensPerSecond > 0 ? 1000 / settings.tokensPerSecond : 0;
    let i = 0;
    const step = () => {
      if (res.destroyed) return;
      if (i === cut && fault !== undefined) {
        if (fault.kind === 'reset-mid-stream') res.socket?.destroy();
        else if (fault.kind === 'malformed-sse') res.end('data: {"id": "broken", "choices": [\n\n');
        else if (fault.kind === 'error-event')
          res.end(
            `data: ${JSON.stringify({ error: { message: fault.message ?? 'mock mid-stream failure', type: 'server_error' } })}\n\n`,
          );
        return;
      }
      if (interval === 0) {
        res.end(events.join(''));
        return;
      }
      // Tokens are paced; the finish, usage and [DONE] events follow the last token at once.
      if (i >= n) {
        res.end(events.slice(i).join(''));
        return;
      }
      res.write(events[i++]);
      setTimeout(step, interval);
    };
    if (cut > 0 && interval === 0) {
      // The fault comes once the events before it have surely reached the client.
      i = cut;
      res.write(events.slice(0, cut).join(''), () => setTimeout(step, 10));
      return;
    }
    step();
  };

  const complete = (res: ServerResponse, body: Record<string, unknown>, fault: Fault | undefined) => {
    if (fault?.kind === 'malformed-sse') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end('{"id": "broken", "choices": [');
    }
    const pieces = replyPieces(settings, body);
    const n = pieces.length;
    const prompt = promptTokens(body);
    const content = pieces.join('');
    json(res, 200, {
      id: `chatcmpl-mock-${++sequence}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop', logprobs: null }],
      ...(settings.usage ? { usage: { prompt_tokens: prompt, completion_tokens: n, total_tokens: prompt + n } } : {}),
      system_fingerprint: 'fp_mock',
    });
  };

  const embeddings = (res: ServerResponse, body: Record<string, unknown>) => {
    const inputs = typeof body.input === 'string' ? [body.input] : (body.input as string[]);
    if (!Array.isArray(inputs) || inputs.length === 0) return error(res, 400, 'input must not be empty');
    if (settings.maxEmbeddingBatch !== undefined && inputs.length > settings.maxEmbeddingBatch) {
      return error(res, 400, `at most ${settings.maxEmbeddingBatch} inputs per request`);
    }
    const base64 = body.encoding_format === 'base64';
    // OpenAI's text-embedding-3 models take `dimensions`; the mock makes vectors of that length.
    const dimensions = typeof body.dimensions === 'number' ? body.dimensions : settings.embeddingDimensions;
    const data = inputs.map((text, index) => {
      const vector = (settings.embeddingKind === 'words' ? wordVectorFor : vectorFor)(text, dimensions);
      return {
        object: 'embedding',
        index,
        embedding: base64 ? Buffer.from(vector.buffer).toString('base64') : Array.from(vector),
      };
    });
    const tokens = inputs.reduce((n, text) => n + wordsIn(text), 0);
    json(res, 200, { object: 'list', data, model: body.model, usage: { prompt_tokens: tokens, total_tokens: tokens } });
  };

  /** Relevance: the share of the query's words found in the document (a stand-in for a cross-encoder). */
  const rerank = (res: ServerResponse, body: Record<string, unknown>) => {
    const documents = body.documents as unknown[];
    if (typeof body.query !== 'string' || body.query === '') return error(res, 400, 'query must be a non-empty string');
    if (!Array.isArray(documents) || documents.length === 0) return error(res, 400, 'documents must not be empty');
    const texts = documents.map((d) => {
      const text = typeof d === 'string' ? d : (d as { text?: unknown }).text;
      return typeof text === 'string' ? text : '';
    });
    const words = (text: string) => text.toLowerCase().match(/[a-z0-9]+/g) ?? [];
    const query = new Set(words(body.query));
    const scored = texts.map((text, index) => {
      const present = new Set(words(text));
      const hits = [...query].filter((w) => present.has(w)).length;
      return { index, relevance_score: hits / Math.max(query.size, 1) + 1 / (100 + text.length) };
    });
    scored.sort((a, b) => b.relevance_score - a.relevance_score);
    const topN = typeof body.top_n === 'number' ? body.top_n : texts.length;
    const results = scored.slice(0, topN);
    if (settings.rerankFormat === 'cohere') {
      return json(res, 200, {
        id: `mock-rerank-${++sequence}`,
        results,
        meta: { api_version: { version: '2' }, billed_units: { search_units: 1 } },
      });
    }
    const tokens = texts.reduce((n, t) => n + wordsIn(t) + query.size, 0);
    json(res, 200, {
      model: body.model,
      usage: { total_tokens: tokens },
      results: results.map((r) =>
        body.return_documents === false
          ? r
          : { index: r.index, document: { text: texts[r.index] }, relevance_score: r.relevance_score },
      ),
    });
  };

  const handle = (
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    body: Record<string, unknown> | undefined,
  ) => {
    if (settings.apiKey !== undefined && req.headers.authorization !== `Bearer ${settings.apiKey}`) {
      return error(res, 401, 'Incorrect API key provided', 'invalid_api_key');
    }
    if (req.method === 'GET' && path === '/v1/models') {
      if (settings.modelsStatus !== 200) return error(res, settings.modelsStatus, 'models unavailable');
      return json(res, 200, {
        object: 'list',
        data: settings.models.map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'mock' })),
      });
    }
    if (req.method !== 'POST' || body === undefined) return error(res, 404, `no route ${req.method} ${path}`);
    const fault = faults.shift();
    if (fault !== undefined && applyFault(fault, res)) return;
    if (!settings.models.includes(String(body.model))) {
      return error(res, 404, `The model '${String(body.model)}' does not exist`, 'model_not_found');
    }
    if (path === '/v1/chat/completions') {
      const refusal = settings.reasoningModels.includes(String(body.model)) ? reasoningRefusal(body) : undefined;
      if (refusal !== undefined) return json(res, 400, { error: { type: 'invalid_request_error', ...refusal } });
      return body.stream === true ? stream(res, body, fault) : complete(res, body, fault);
    }
    if (path === '/v1/embeddings') return embeddings(res, body);
    if (path === '/v1/rerank') return rerank(res, body);
    return error(res, 404, `no route ${req.method} ${path}`);
  };

  const server = createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (piece: string) => (raw += piece));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0] ?? '/';
      let body: Record<string, unknown> | undefined;
      try {
        body = raw === '' ? undefined : (JSON.parse(raw) as Record<string, unknown>);
      } catch {
        return error(res, 400, 'body is not JSON');
      }
      if (settings.record) {
        const entry: ReceivedRequest = {
          method: req.method ?? '',
          path,
          headers: req.headers,
          body,
          aborted: false,
          finished: false,
          sent: '',
        };
        requests.push(entry);
        const write = res.write.bind(res) as (chunk: string, done?: () => void) => boolean;
        res.write = ((chunk: string, done?: () => void) => {
          entry.sent += chunk;
          return write(chunk, done);
        }) as typeof res.write;
        const end = res.end.bind(res) as (chunk?: string) => ServerResponse;
        res.end = ((chunk?: string) => {
          if (typeof chunk === 'string') entry.sent += chunk;
          return end(chunk);
        }) as typeof res.end;
        res.once('close', () => {
          entry.finished = res.writableFinished;
          entry.aborted = !res.writableFinished;
        });
      }
      if (settings.latencyMs > 0) setTimeout(() => handle(req, res, path, body), settings.latencyMs);
      else handle(req, res, path, body);
    });
  });
  const host = options.host ?? '127.0.0.1';
  const port = await listenWithAcceptors(
    server,
    (reusePort) =>
      new Promise<void>((resolve) =>
        server.listen({ port: options.port ?? 0, host, backlog: 4096, reusePort }, resolve),
      ),
    { host, port: options.port ?? 0, acceptors: options.acceptors ?? 1, backlog: 4096 },
  );

  return {
    url: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    options: settings,
    inject(fault, times = 1) {
      for (let i = 0; i < times; i++) faults.push(fault);
    },
    count: (path) => requests.filter((r) => r.method === 'POST' && r.path === path).length,
    async waitFor(predicate, timeoutMs = 5_000) {
      await until('a mock upstream condition', predicate, { timeoutMs, intervalMs: 5 });
    },
    reset() {
      requests.length = 0;
      faults.length = 0;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
