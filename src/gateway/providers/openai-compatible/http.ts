import { Pool, type Dispatcher } from 'undici';
import { failureFrom, UpstreamFailure } from '../provider.ts';

function retryAfterMs(headers: Dispatcher.ResponseData['headers']): number | undefined {
  const ms = headers['retry-after-ms'];
  if (typeof ms === 'string' && Number.isFinite(Number(ms))) return Number(ms);
  const value = headers['retry-after'];
  if (typeof value !== 'string') return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/** The readable text of an HTML error page: what its body says, without head, scripts and tags. */
const textOfHtml = (html: string) =>
  html
    .replace(/<(head|script|style)\b[\s\S]*?<\/\1\s*>/gi, ' ')
    .replace(/<[^>]*>/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();

/**
 * What an error body says: OpenAI's `error` (an object or a string), FastAPI's `detail` (a string,
 * or its validation list as `loc: msg`), a bare `message`; an HTML page's text; else the text.
 */
export function errorOf(text: string): {
  message: string | undefined;
  code?: string;
  type?: string;
  param?: string;
} {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    const plain = /^\s*</.test(text) ? textOfHtml(text) : text.trim();
    return { message: plain.slice(0, 1000) || undefined };
  }
  if (typeof parsed !== 'object' || parsed === null) return { message: text.slice(0, 1000) };
  const { error, detail, message } = parsed as { error?: unknown; detail?: unknown; message?: unknown };
  if (typeof error === 'string') return { message: error };
  if (typeof error === 'object' && error !== null) {
    const e = error as { message?: unknown; code?: unknown; type?: unknown; param?: unknown };
    return {
      message: typeof e.message === 'string' ? e.message : text.slice(0, 1000),
      ...(typeof e.code === 'string' ? { code: e.code } : {}),
      ...(typeof e.type === 'string' ? { type: e.type } : {}),
      ...(typeof e.param === 'string' ? { param: e.param } : {}),
    };
  }
  if (typeof detail === 'string') return { message: detail };
  if (Array.isArray(detail)) {
    const items = detail.map((d: { loc?: unknown; msg?: unknown }) =>
      typeof d?.msg !== 'string' ? JSON.stringify(d) : Array.isArray(d.loc) ? `${d.loc.join('.')}: ${d.msg}` : d.msg,
    );
    return { message: items.join('; ').slice(0, 1000) };
  }
  if (typeof message === 'string') return { message };
  return { message: text.slice(0, 1000) };
}

/**
 * An upstream's answer without the provider's API key in it: a provider that echoes the
 * `Authorization` header it refused (`Incorrect API key provided: Bearer sk-…`) had it written to
 * the log in full, and relayed to the client in a 400's message.
 */
export function withoutSecret(text: string, secret: string | undefined): string {
  if (secret === undefined || secret.length < 4 || !text.includes(secret)) return text;
  return text.split(secret).join('***');
}

/** Error codes that blame the request, in in-band errors that give no HTTP status. */
const requestErrorCodes = new Set([
  'context_length_exceeded',
  'invalid_value',
  'invalid_request_error',
  'string_above_max_length',
]);

/**
 * A stream's in-band `{"error": {...}}` event as a failure. The stream's HTTP status was 200, so
 * the status it stands for comes from the error: a numeric `code` from 400 to 599 (OpenRouter
 * sends the HTTP status there), else 400 for an error that blames the request (type
 * `invalid_request_error`, or a code such as `context_length_exceeded`), else none: a server
 * error, retried and failed over before the first event like a 5xx.
 */
export function inBandFailure(provider: string, error: unknown, secret?: string): UpstreamFailure {
  const { message, code, type, param } = errorOf(withoutSecret(JSON.stringify({ error }), secret));
  const numeric = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  const status =
    typeof numeric === 'number' && Number.isInteger(numeric) && numeric >= 400 && numeric <= 599
      ? numeric
      : type === 'invalid_request_error' || (code !== undefined && requestErrorCodes.has(code))
        ? 400
        : undefined;
  return new UpstreamFailure({
    kind: 'status',
    provider,
    message: message ?? 'error event without a message',
    inBand: true,
    ...(status === undefined ? {} : { status }),
    ...(code === undefined ? {} : { code }),
    ...(type === undefined ? {} : { type }),
    ...(param === undefined ? {} : { param }),
  });
}

/** An upstream's non-2xx answer as a failure, keeping its own message, code, type and param. */
export async function statusFailure(
  provider: string,
  response: Dispatcher.ResponseData,
  secret?: string,
): Promise<UpstreamFailure> {
  const text = withoutSecret(await response.body.text().catch(() => ''), secret);
  const { message, code, type, param } = errorOf(text);
  return new UpstreamFailure({
    kind: 'status',
    provider,
    status: response.statusCode,
    message: message || `HTTP ${response.statusCode}`,
    ...(code === undefined ? {} : { code }),
    ...(type === undefined ? {} : { type }),
    ...(param === undefined ? {} : { param }),
    ...(retryAfterMs(response.headers) === undefined ? {} : { retryAfterMs: retryAfterMs(response.headers) }),
  });
}

export interface UpstreamHttp {
  request(
    method: 'GET' | 'POST',
    path: string,
    body: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Dispatcher.ResponseData>;
  close(): Promise<void>;
}

export interface UpstreamHttpOptions {
  provider: string;
  baseUrl: string;
  apiKey: string | undefined;
  timeoutMs: number;
  connectTimeoutMs: number;
  maxConnections: number;
}

/** A keep-alive connection pool to one upstream; the key lives only in this closure's headers. */
export function createUpstreamHttp(options: UpstreamHttpOptions): UpstreamHttp {
  const base = new URL(options.baseUrl);
  const prefix = base.pathname.replace(/\/+$/, '');
  const pool = new Pool(base.origin, {
    connections: options.maxConnections,
    connectTimeout: options.connectTimeoutMs,
    keepAliveTimeout: 30_000,
  });
  const auth = options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` };
  const postHeaders = { 'content-type': 'application/json', ...auth };
  const getHeaders = { ...auth };
  return {
    async request(method, path, body, signal) {
      try {
        return await pool.request({
          origin: base.origin,
          method,
          path: prefix + path,
          headers: method === 'POST' ? postHeaders : getHeaders,
          body: body ?? null,
          signal: signal ?? null,
          headersTimeout: options.timeoutMs,
          bodyTimeout: options.timeoutMs,
        });
      } catch (error) {
        throw failureFrom(options.provider, error, signal);
      }
    },
    close: () => pool.close(),
  };
}
