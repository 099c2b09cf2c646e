import { endpoint, isRecord, mapResults, type SearchProvider } from '../provider.ts';

/** SearXNG's JSON API (`format=json` must be enabled in the instance's settings). */
export function searxngProvider(options: { baseUrl: string }): SearchProvider {
  return {
    name: 'SearXNG',
    request(q) {
      const url = endpoint(options.baseUrl, '/search');
      url.searchParams.set('q', q.query);
      url.searchParams.set('format', 'json');
      if (q.timeRange) url.searchParams.set('time_range', q.timeRange);
      return { url, init: { method: 'GET', headers: { accept: 'application/json' } } };
    },
    results(body) {
      // SearXNG has no count parameter: the tool keeps the first `count`.
      return isRecord(body) ? mapResults(body.results, 'content') : undefined;
    },
    errorMessage(body) {
      if (!isRecord(body)) return undefined;
      return typeof body.error === 'string' ? body.error : undefined;
    },
    explain(status) {
      // SearXNG answers 403 to format=json unless `search.formats` in settings.yml lists json.
      return status === 403 ? 'JSON format is not enabled on this instance (search.formats)' : undefined;
    },
  };
}
