import { setTimeout as sleep } from 'node:timers/promises';
import type { SearchProvider, SearchQuery, WebPage } from './provider.ts';

export type SearchOutcome =
  | { ok: true; results: WebPage[] }
  /** `message` is the whole contract message: `<Provider> API error: <status> <message>`. */
  | { ok: false; status: number | undefined; message: string };

export interface SearchClientOptions {
  timeoutMs: number;
  /** Secrets that must never appear in a message relayed from the provider. */
  secrets: readonly string[];
  retryDelayMs?: number;
}

const MAX_MESSAGE = 300;

/** What a status means when the provider's body does not say. */
function defaultMessage(status: number): string {
  if (status === 401 || status === 403) return 'invalid or unauthorized API key';
  if (status === 429) return 'rate limit or quota exceeded';
  if (status >= 500) return 'provider unavailable';
  return 'request rejected';
}

function clean(text: string, secrets: readonly string[]): string {
  let out = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  for (const secret of secrets) if (secret) out = out.split(secret).join('***');
  return out.length > MAX_MESSAGE ? `${out.slice(0, MAX_MESSAGE)}…` : out;
}

/** Largest provider answer read: a page of results is tens of kilobytes. */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

class BodyTooLarge extends Error {}

async function readBody(response: Response): Promise<{ json: unknown; text: string }> {
  const declared = Number(response.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) {
    await response.body?.cancel();
    throw new BodyTooLarge();
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of (response.body ?? []) as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > MAX_BODY_BYTES) {
      await response.body?.cancel().catch(() => undefined);
      throw new BodyTooLarge();
    }
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return { json: JSON.parse(text) as unknown, text };
  } catch {
    return { json: undefined, text };
  }
}

/**
 * Sends one search to a provider: a timeout per attempt, one retry on a 5xx or a connection
 * error (not on a timeout, which already spent the caller's budget), and every failure turned
 * into the contract's message naming the provider, its status and its message.
 */
export async function search(
  provider: SearchProvider,
  query: SearchQuery,
  options: SearchClientOptions,
  signal: AbortSignal,
): Promise<SearchOutcome> {
  const fail = (status: number | undefined, message: string): SearchOutcome => ({
    ok: false,
    status,
    message: `${provider.name} API error: ${status === undefined ? '' : `${status} `}${clean(message, options.secrets)}`,
  });

  for (let attempt = 1; ; attempt++) {
    const { url, init } = provider.request(query);
    let response: Response;
    try {
      response = await fetch(url, {
        ...init,
        redirect: 'error',
        signal: AbortSignal.any([signal, AbortSignal.timeout(options.timeoutMs)]),
      });
    } catch (error) {
      if (signal.aborted) throw error;
      const timedOut = error instanceof DOMException && error.name === 'TimeoutError';
      if (timedOut) return fail(undefined, `no response within ${options.timeoutMs} ms`);
      if (attempt === 1) {
        await sleep(options.retryDelayMs ?? 200, undefined, { signal });
        continue;
      }
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      // fetch's `redirect: 'error'`: a redirect is never followed (it could point anywhere).
      if (/redirect/i.test(cause?.message ?? ''))
        return fail(undefined, 'answered with a redirect, which is not followed');
      return fail(undefined, `connection failed${cause?.code ? ` (${cause.code})` : ''}`);
    }

    if (response.status >= 500 && attempt === 1) {
      await response.body?.cancel();
      await sleep(options.retryDelayMs ?? 200, undefined, { signal });
      continue;
    }
    let body: { json: unknown; text: string };
    try {
      body = await readBody(response);
    } catch (error) {
      if (signal.aborted) throw error;
      if (error instanceof BodyTooLarge) {
        return fail(response.status, `response body larger than ${MAX_BODY_BYTES / 1024 / 1024} MB`);
      }
      return fail(response.status, 'response body could not be read');
    }
    if (!response.ok) {
      const message =
        provider.errorMessage(body.json) ??
        (body.json === undefined && body.text.length < 200 && !/[<>]/.test(body.text) ? body.text : '');
      return fail(response.status, message || provider.explain?.(response.status) || defaultMessage(response.status));
    }
    const results = provider.results(body.json);
    if (!results) return fail(response.status, 'unexpected response body');
    return { ok: true, results };
  }
}
