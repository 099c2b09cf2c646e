import type { Logger } from 'pino';
import { z } from 'zod';
import type { WebSearchConfig } from '../../config.ts';
import { AppError } from '../../errors.ts';
import type { Tool } from '../tool.types.ts';
import { createTtlCache } from './cache.ts';
import { readable, type SearchProvider, type WebPage } from './provider.ts';
import { braveProvider } from './providers/brave.ts';
import { searxngProvider } from './providers/searxng.ts';
import { tavilyProvider } from './providers/tavily.ts';
import { search } from './search.client.ts';

const NOT_CONFIGURED =
  'no search provider is configured; set BRAVE_SEARCH_API_KEY, TAVILY_API_KEY or SEARXNG_URL to enable it';

export const webSearchParameters = z.object({
  query: z.string().trim().min(1).max(1000),
  count: z.number().int().min(1).max(20).default(5),
  time_range: z.enum(['day', 'week', 'month', 'year']).optional(),
});

export const webSearchResult = z.object({
  results: z.array(z.object({ title: z.string(), url: z.string(), snippet: z.string() })),
});

export type WebSearchParameters = z.infer<typeof webSearchParameters>;
export type WebSearchResult = z.infer<typeof webSearchResult>;

/** The configured provider: the explicit choice, else the first of Brave, Tavily, SearXNG. */
export function selectProvider(config: WebSearchConfig): { provider: SearchProvider; secrets: string[] } | undefined {
  const { brave, searxng, tavily } = config;
  const choice = config.provider ?? (brave ? 'brave' : tavily ? 'tavily' : searxng ? 'searxng' : undefined);
  if (choice === 'brave' && brave) return { provider: braveProvider(brave), secrets: [brave.apiKey] };
  if (choice === 'tavily' && tavily) return { provider: tavilyProvider(tavily), secrets: [tavily.apiKey] };
  if (choice === 'searxng' && searxng) return { provider: searxngProvider(searxng), secrets: [] };
  return undefined;
}

export function createWebSearchTool(deps: {
  config: WebSearchConfig;
  logger: Logger;
}): Tool<WebSearchParameters, WebSearchResult> {
  const selected = selectProvider(deps.config);
  const cache = createTtlCache<WebPage[]>({ ttlMs: deps.config.cacheTtlMs, maxEntries: 1000 });
  return {
    name: 'web_search',
    description: 'searches the web through the configured provider (Brave Search, SearXNG or Tavily)',
    parameters: webSearchParameters,
    result: webSearchResult,
    enabled: () => selected !== undefined,
    disabledReason: () => NOT_CONFIGURED,
    async run(parameters, context) {
      if (!selected)
        throw new AppError({ code: 'not_found', message: "Tool 'web_search' not found" });
      const { provider, secrets } = selected;
      const query = { query: parameters.query, count: parameters.count, timeRange: parameters.time_range };
      const key = JSON.stringify([query.query, query.count, query.timeRange ?? null]);
      const cached = cache.get(key);
      if (cached) return { results: cached };

      const outcome = await search(provider, query, { timeoutMs: deps.config.timeoutMs, secrets }, context.signal);
      if (!outcome.ok) {
        deps.logger.warn({ provider: provider.name, status: outcome.status }, 'web search provider failed');
        throw new AppError({ code: 'upstream_error', message: outcome.message });
      }
      const results = await readable(outcome.results.slice(0, query.count));
      cache.set(key, results);
      return { results };
    },
  };
}
