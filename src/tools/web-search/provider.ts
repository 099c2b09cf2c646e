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

/** `html`'s text, read from its first 16 times `max` characters and cut to `max` with an ellipsis. */
function textOf(html: string, max: number): string {
  const text = stripHtml(html.length > max * 16 ? html.slice(0, max * 16) : html);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** Maps `[{title, url, <snippetField>}]` to results, dropping entries without a URL (or with one too long to be real). */
export function mapResults(list: unknown, snippetField: string): WebPage[] | undefined {
  if (!Array.isArray(list)) return undefined;
  return list.filter(isRecord).flatMap((r) => {
    const url = str(r.url);
    if (!url || url.length > RESULT_LIMITS.url) return [];
    return [
      {
        title: textOf(str(r.title), RESULT_LIMITS.title),
        url,
        snippet: textOf(str(r[snippetField]), RESULT_LIMITS.snippet),
      },
    ];
  });
}

/** Joins URL paths: a base URL may carry a path prefix (a SearXNG behind /searx, a proxy). */
export function endpoint(base: string, path: string): URL {
  const url = new URL(base);
  url.pathname = url.pathname.replace(/\/+$/, '') + path;
  return url;
}
