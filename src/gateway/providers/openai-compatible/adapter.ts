import type { Dispatcher } from 'undici';
import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { CreateEmbeddingResponse } from 'openai/resources/embeddings';
import type { Model } from 'openai/resources/models';
import type { ResolvedProvider } from '../config.ts';
import {
  failureFrom,
  tokenCount,
  UpstreamFailure,
  type ChatProvider,
  type RerankItem,
  type StreamEvent,
  type UpstreamModel,
} from '../provider.ts';
import { createUpstreamHttp, inBandFailure, statusFailure } from './http.ts';
import { createSseParser } from './sse.ts';

type Body = Dispatcher.ResponseData['body'];

/** Embeddings as the upstream may send them: floats, or base64 little-endian float32. */
type EmbeddingItem = Omit<CreateEmbeddingResponse['data'][number], 'embedding'> & { embedding: number[] | string };

/** An item's vector, or undefined when it is none: floats, or base64 of little-endian float32s. */
function decodeVector(value: unknown): number[] | undefined {
  if (typeof value === 'string') {
    const bytes = Buffer.from(value, 'base64');
    if (bytes.byteLength === 0 || bytes.byteLength % 4 !== 0) return undefined;
    const vector = new Array<number>(bytes.byteLength >> 2);
    for (let i = 0; i < vector.length; i++) vector[i] = bytes.readFloatLE(i * 4);
    return vector.every(Number.isFinite) ? vector : undefined;
  }
  if (!Array.isArray(value) || value.length === 0) return undefined;
  return value.every((x) => typeof x === 'number' && Number.isFinite(x)) ? (value as number[]) : undefined;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** JSON text with its line breaks (whitespace between tokens, once parsed) made spaces: one SSE line. */
const oneLine = (json: string) => (json.includes('\n') || json.includes('\r') ? json.replace(/[\r\n]/g, ' ') : json);

/** A rerank response as Jina, vLLM and Cohere (v1, v2) send it; only what ragport reads. */
interface RerankBody {
  results?: { index?: unknown; relevance_score?: unknown }[];
  usage?: { total_tokens?: number };
  meta?: { billed_units?: { input_tokens?: number } };
}

/** An OpenAI-compatible upstream over undici's pool: request bodies out, upstream bytes back. */
export function createOpenAICompatibleProvider(config: ResolvedProvider): ChatProvider {
  const name = config.name;
  const apiKey = config.apiKey();
  const http = createUpstreamHttp({
    provider: name,
    baseUrl: config.base_url,
    apiKey,
    timeoutMs: config.timeout_ms,
    connectTimeoutMs: config.connect_timeout_ms,
    maxConnections: config.max_connections,
  });

  const protocolFailure = (message: string, cause?: unknown) =>
    new UpstreamFailure({ kind: 'protocol', provider: name, message: `Provider ${name}: ${message}`, cause });

  const call = async (method: 'GET' | 'POST', path: string, payload: string | undefined, signal?: AbortSignal) => {
    const response = await http.request(method, path, payload, signal);
    if (response.statusCode < 200 || response.statusCode >= 300) throw await statusFailure(name, response, apiKey);
    return response;
  };

  const readJson = async <T>(body: Body, signal?: AbortSignal): Promise<{ text: string; value: T }> => {
    let text: string;
    try {
      text = await body.text();
    } catch (error) {
      throw failureFrom(name, error, signal);
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw protocolFailure('response is not JSON', error);
    }
    if (!isObject(value)) throw protocolFailure('response is not a JSON object');
    return { text, value: value as T };
  };

  /**
   * One stream event from its `data`, or the in-band failure it reports. An event whose JSON
   * spans several `data:` lines (legal SSE) is relayed on one: the client's parser sees one line
   * per event as OpenAI sends them.
   */
  const eventOf = (data: string): StreamEvent => {
    let chunk: ChatCompletionChunk & { error?: unknown };
    try {
      chunk = JSON.parse(data) as typeof chunk;
    } catch (error) {
      throw protocolFailure('malformed stream event', error);
    }
    if (!isObject(chunk)) throw protocolFailure('malformed stream event: not a JSON object');
    if (chunk.error !== undefined && chunk.error !== null) throw inBandFailure(name, chunk.error, apiKey);
    return { raw: oneLine(data), chunk };
  };

  /**
   * The stream's events. It must carry at least one chunk, and end with `[DONE]` or once every
   * choice it streamed has given a `finish_reason`: a 200 with no events (a JSON body, an HTML page) is a
   * malformed response (retried and failed over like one, as nothing reached the client yet);
   * a stream cut short without either is a failure mid-stream, not a complete answer.
   */
  async function* events(body: Body, signal?: AbortSignal): AsyncGenerator<StreamEvent> {
    const parser = createSseParser();
    let chunks = 0;
    // Whether each choice seen (by index: `n` > 1 streams several) has given its finish_reason.
    const finishedChoices = new Map<unknown, boolean>();
    const next = (data: string) => {
      const event = eventOf(data);
      chunks++;
      const choices: unknown = event.chunk.choices;
      if (Array.isArray(choices)) {
        for (const choice of choices as unknown[]) {
          if (!isObject(choice)) continue;
          const index = choice.index ?? 0;
          if (choice.finish_reason) finishedChoices.set(index, true);
          else if (!finishedChoices.has(index)) finishedChoices.set(index, false);
        }
      }
      return event;
    };
    const finished = () => {
      if (finishedChoices.size === 0) return false;
      for (const done of finishedChoices.values()) if (!done) return false;
      return true;
    };
    const done = () => {
      if (chunks === 0) throw protocolFailure('the stream ended without an event');
    };
    try {
      for await (const piece of body as AsyncIterable<Buffer>) {
        for (const data of parser.push(piece)) {
          if (data === '[DONE]') return done();
          yield next(data);
        }
      }
      for (const data of parser.end()) {
        if (data === '[DONE]') return done();
        yield next(data);
      }
      done();
      if (!finished())
        throw protocolFailure('the stream ended before the completion finished (no finish_reason, no [DONE])');
    } catch (error) {
      throw failureFrom(name, error, signal);
    } finally {
      if (!body.destroyed) body.destroy();
    }
  }

  return {
    name,
    embeddingBatchSize: config.embedding_batch_size,

    async complete(params, signal) {
      const response = await call('POST', '/chat/completions', JSON.stringify(params), signal);
      const { text, value } = await readJson<ChatCompletion & { error?: unknown }>(response.body, signal);
      if (!Array.isArray(value.choices)) {
        // An error in a 200 (some proxies answer so) means what the same error in a stream does.
        if (isObject(value.error)) throw inBandFailure(name, value.error, apiKey);
        throw protocolFailure('response has no choices');
      }
      return { body: text, completion: value };
    },

    async stream(params, signal) {
      const response = await call('POST', '/chat/completions', JSON.stringify(params), signal);
      return events(response.body, signal);
    },

    async embed(model, inputs, signal, options = {}) {
      const payload = JSON.stringify({
        ...options.extra,
        model,
        input: inputs,
        encoding_format: 'base64',
        ...(options.dimensions === undefined ? {} : { dimensions: options.dimensions }),
      });
      const response = await call('POST', '/embeddings', payload, signal);
      const { value } = await readJson<{ data?: EmbeddingItem[]; usage?: { prompt_tokens?: number } }>(
        response.body,
        signal,
      );
      const data = value.data;
      if (!Array.isArray(data) || data.length !== inputs.length) {
        throw protocolFailure(`embeddings response has ${data?.length ?? 0} items for ${inputs.length} inputs`);
      }
      const vectors = new Array<number[]>(inputs.length);
      let length: number | undefined;
      for (const [position, item] of data.entries()) {
        const index = isObject(item) ? (item.index ?? position) : position;
        if (!Number.isInteger(index) || index < 0 || index >= inputs.length || vectors[index] !== undefined) {
          throw protocolFailure(
            `embeddings item index ${String(index)} is not one of ${inputs.length} inputs, or repeats`,
          );
        }
        const vector = isObject(item) ? decodeVector(item.embedding) : undefined;
        if (vector === undefined) throw protocolFailure(`embedding ${index} is not a vector of numbers`);
        length ??= vector.length;
        if (vector.length !== length) throw protocolFailure('embeddings in one response have different lengths');
        vectors[index] = vector;
      }
      return { vectors, promptTokens: tokenCount(value.usage?.prompt_tokens) ?? 0 };
    },

    async rerank(model, query, documents, topN, signal) {
      // Documents go as strings (Cohere v2 accepts nothing else); ragport adds them back itself.
      const payload = JSON.stringify({ model, query, documents, top_n: topN });
      const response = await call('POST', '/rerank', payload, signal);
      const { value } = await readJson<RerankBody>(response.body, signal);
      if (!Array.isArray(value.results)) throw protocolFailure('rerank response has no results');
      const results: RerankItem[] = [];
      for (const item of value.results) {
        const { index, relevance_score: score } = item;
        if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= documents.length) {
          throw protocolFailure(`rerank result index ${String(index)} is not one of ${documents.length} documents`);
        }
        if (typeof score !== 'number' || !Number.isFinite(score)) {
          throw protocolFailure('rerank result has no numeric relevance_score');
        }
        results.push({ index, relevanceScore: score });
      }
      results.sort((a, b) => b.relevanceScore - a.relevanceScore || a.index - b.index);
      const totalTokens =
        tokenCount(value.usage?.total_tokens) ?? tokenCount(value.meta?.billed_units?.input_tokens) ?? 0;
      return { results: results.slice(0, topN), totalTokens };
    },

    async listModels(signal) {
      const response = await call('GET', '/models', undefined, signal);
      const { value } = await readJson<{ data?: Model[] }>(response.body, signal);
      if (!Array.isArray(value.data)) throw protocolFailure('model list has no data');
      return value.data
        .filter((m) => typeof m.id === 'string')
        .map((m): UpstreamModel => ({ id: m.id, created: typeof m.created === 'number' ? m.created : 0 }));
    },

    close: () => http.close(),
  };
}
