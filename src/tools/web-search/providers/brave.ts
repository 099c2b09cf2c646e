import { endpoint, isRecord, mapResults, type SearchProvider, type TimeRange } from '../provider.ts';

const freshness: Record<TimeRange, string> = { day: 'pd', week: 'pw', month: 'pm', year: 'py' };

/** Brave Search API: `GET /res/v1/web/search`, key in `X-Subscription-Token`. */
export function braveProvider(options: { apiKey: string; baseUrl: string }): SearchProvider {
  return {
    name: 'Brave Search',
    request(q) {
      const url = endpoint(options.baseUrl, '/res/v1/web/search');
      url.searchParams.set('q', q.query);
      url.searchParams.set('count', String(q.count));
      if (q.timeRange) url.searchParams.set('freshness', freshness[q.timeRange]);
      return {
        url,
        init: {
          method: 'GET',
          headers: { accept: 'application/json', 'x-subscription-token': options.apiKey },
        },
      };
    },
    results(body) {
      if (!isRecord(body)) return undefined;
      // No `web` section is a valid answer with no web results.
      if (body.web === undefined) return [];
      return isRecord(body.web) ? mapResults(body.web.results, 'description') : undefined;
    },
    errorMessage(body) {
      // {"type": "ErrorResponse", "error": {"code": "...", "detail": "...", "status": 422}}
      if (!isRecord(body) || !isRecord(body.error)) return undefined;
      const { detail, code } = body.error;
      return typeof detail === 'string' ? detail : typeof code === 'string' ? code : undefined;
    },
  };
}
