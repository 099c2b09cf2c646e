import { endpoint, isRecord, mapResults, type SearchProvider } from '../provider.ts';

/** Tavily: `POST /search` with a JSON body, key as `Authorization: Bearer`. */
export function tavilyProvider(options: { apiKey: string; baseUrl: string }): SearchProvider {
  return {
    name: 'Tavily',
    request(q) {
      const body: Record<string, unknown> = {
        query: q.query,
        max_results: q.count,
        search_depth: 'basic',
        topic: 'general',
        include_answer: false,
        include_raw_content: false,
        include_images: false,
      };
      if (q.timeRange) body.time_range = q.timeRange;
      return {
        url: endpoint(options.baseUrl, '/search'),
        init: {
          method: 'POST',
          headers: {
            accept: 'application/json',
            'content-type': 'application/json',
            authorization: `Bearer ${options.apiKey}`,
          },
          body: JSON.stringify(body),
        },
      };
    },
    results(body) {
      return isRecord(body) ? mapResults(body.results, 'content') : undefined;
    },
    errorMessage(body) {
      // {"detail": {"error": "..."}}, or {"detail": "..."} from request validation.
      if (!isRecord(body)) return undefined;
      const { detail } = body;
      if (typeof detail === 'string') return detail;
      if (isRecord(detail) && typeof detail.error === 'string') return detail.error;
      if (isRecord(body.error) && typeof body.error.message === 'string') return body.error.message;
      return undefined;
    },
  };
}
