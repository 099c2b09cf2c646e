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

/** An upstream's non-2xx answer as a failure, keeping its own message, code and type. */
export async function statusFailure(provider: string, response: Dispatcher.ResponseData): Promise<UpstreamFailure> {
  const text = await response.body.text().catch(() => '');
  let message = text.slice(0, 1000) || `HTTP ${response.statusCode}`;
  let code: string | undefined;
  let type: string | undefined;
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown; code?: unknown; type?: unknown } | string };
    const error = parsed.error;
    if (typeof error === 'string') message = error;
    else if (error !== undefined) {
      if (typeof error.message === 'string') message = error.message;
      if (typeof error.code === 'string') code = error.code;
      if (typeof error.type === 'string') type = error.type;
    }
  } catch {
    // Not JSON: the text itself is the message.
  }
  return new UpstreamFailure({
    kind: 'status',
    provider,
    status: response.statusCode,
    message,
    ...(code === undefined ? {} : { code }),
    ...(type === undefined ? {} : { type }),
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
