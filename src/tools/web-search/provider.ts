import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { stripHtml } from './html.ts';

export type TimeRange = 'day' | 'week' | 'month' | 'year';

export interface SearchQuery {
  query: string;
  count: number;
  timeRange: TimeRange | undefined;
}

/** One page a web search found. */
export interface WebPage {
  title: string;
  url: string;
  snippet: string;
}

/** A provider's HTTP request, built from a query; the same shape for all of them. */
export interface ProviderRequest {
  url: URL;
  init: { method: 'GET' | 'POST'; headers: Record<string, string>; body?: string };
}

/** One search API: how to ask it and how to read its answer. Transport is shared (search.client.ts). */
export interface SearchProvider {
  /** The name used in error messages: `<name> API error: <status> <message>`. */
  readonly name: string;
  request(query: SearchQuery): ProviderRequest;
  /** Reads a 2xx body; undefined when it is not the documented shape. */
  results(body: unknown): WebPage[] | undefined;
  /** The human message in an error body, in whatever shape this provider uses. */
  errorMessage(body: unknown): string | undefined;
  /** What a status means for this provider when its body says nothing readable. */
  explain?(status: number): string | undefined;
}

export const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** Longest title, snippet and URL kept of a result (a search result's are a few hundred characters). */
export const RESULT_LIMITS = { title: 1_000, snippet: 4_000, url: 4_096 };

/**
 * HTML read of a title or snippet: twice its limit in characters. Parsing costs about 1 µs a
 * character on the server's thread; at 16 times, 20 results of nested tags (1.5 MB, under the
 * body cap) held it 1.4 s, and `/healthz` waited.
 */
const HTML_READ = 2;

/** `html`'s text, read from its first `HTML_READ` times `max` characters and cut to `max` with an ellipsis. */
function textOf(html: string, max: number): string {
  const text = stripHtml(html.length > max * HTML_READ ? html.slice(0, max * HTML_READ) : html).toWellFormed();
  // Not cut inside a surrogate pair: the half left would be a lone surrogate in the JSON answer.
  return text.length > max ? `${text.slice(0, max - 1).toWellFormed()}…` : text;
}

/** A result's URL is a web page's: `javascript:` or `data:` from a provider would be a link a client renders. */
const webUrl = /^https?:\/\//i;

/**
 * Maps `[{title, url, <snippetField>}]` to results, dropping entries without a web URL (or with
 * one too long to be real). Title and snippet are still the provider's HTML here, cut to what
 * `readable` reads: only the results kept are parsed.
 */
export function mapResults(list: unknown, snippetField: string): WebPage[] | undefined {
  if (!Array.isArray(list)) return undefined;
  const cut = (v: unknown, max: number) => str(v).slice(0, max * HTML_READ);
  return list.filter(isRecord).flatMap((r) => {
    const url = str(r.url).toWellFormed();
    if (!url || url.length > RESULT_LIMITS.url || !webUrl.test(url)) return [];
    return [{ title: cut(r.title, RESULT_LIMITS.title), url, snippet: cut(r[snippetField], RESULT_LIMITS.snippet) }];
  });
}

/** Results' titles and snippets as text, cut to their limits; the server's thread is given back between two. */
export async function readable(results: readonly WebPage[]): Promise<WebPage[]> {
  const out: WebPage[] = [];
  for (const r of results) {
    out.push({ ...r, title: textOf(r.title, RESULT_LIMITS.title), snippet: textOf(r.snippet, RESULT_LIMITS.snippet) });
    await yieldToLoop();
  }
  return out;
}

/** Joins URL paths: a base URL may carry a path prefix (a SearXNG behind /searx, a proxy). */
export function endpoint(base: string, path: string): URL {
  const url = new URL(base);
  url.pathname = url.pathname.replace(/\/+$/, '') + path;
  return url;
}
