import type { FastifyInstance } from 'fastify';

/** Which browser origins may call the API: none (CORS off), any, or a list of exact origins. */
export type CorsOrigins = 'none' | 'any' | ReadonlySet<string>;

/** What a script may read of a response besides the safelisted headers: the ids and the limits. */
const EXPOSED = 'x-request-id, x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset, retry-after';
const METHODS = 'GET, POST, PUT, PATCH, DELETE';
/** How long a browser may reuse a preflight's answer (Chromium caps it at 2 hours). */
const MAX_AGE_S = 600;

/**
 * `CORS_ORIGINS`: unset or empty is off, `*` is any origin, otherwise a comma-separated list of
 * origins (`https://app.example.com`, `http://localhost:3000`). An entry that is not an origin
 * (a path, a query, no scheme) is an error, not silently never matched.
 */
export function parseCorsOrigins(value: string | undefined): CorsOrigins {
  const entries = (value ?? '')
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '');
  if (entries.length === 0) return 'none';
  if (entries.includes('*')) {
    if (entries.length > 1) throw new Error('CORS_ORIGINS: `*` stands alone (any origin), not in a list');
    return 'any';
  }
  return new Set(
    entries.map((entry) => {
      let url: URL;
      try {
        url = new URL(entry);
      } catch {
        throw new Error(`CORS_ORIGINS: '${entry}' is not an origin (scheme://host[:port])`);
      }
      if (!/^https?:$/.test(url.protocol) || url.origin !== entry.replace(/\/$/, '')) {
        throw new Error(`CORS_ORIGINS: '${entry}' is not an origin (scheme://host[:port], no path)`);
      }
      return url.origin;
    }),
  );
}

/**
 * Cross-origin access for browser apps, off unless `CORS_ORIGINS` is set. An allowed origin's
 * requests get `Access-Control-Allow-Origin` (and the headers a script may read, the rate limits
 * among them) on every answer, errors and streams included; its preflights (`OPTIONS` with
 * `Access-Control-Request-Method`) are answered 204 here, before authentication and rate limits:
 * a browser sends no credentials on a preflight. Keys still authenticate every real request;
 * CORS only decides which pages' scripts may read the answers.
 */
export function installCors(app: FastifyInstance, origins: CorsOrigins): void {
  if (origins === 'none') return;
  app.addHook('onRequest', async (request, reply) => {
    const origin = request.headers.origin;
    if (origin === undefined) return;
    const allowed = origins === 'any' || origins.has(origin);
    if (origins !== 'any') void reply.header('vary', 'Origin');
    if (!allowed) return;
    void reply.header('access-control-allow-origin', origins === 'any' ? '*' : origin);
    const preflight = request.method === 'OPTIONS' && request.headers['access-control-request-method'] !== undefined;
    if (!preflight) {
      void reply.header('access-control-expose-headers', EXPOSED);
      return;
    }
    const asked = request.headers['access-control-request-headers'];
    void reply
      .code(204)
      .header('access-control-allow-methods', METHODS)
      .header('access-control-max-age', String(MAX_AGE_S));
    // The SDKs send their own headers (x-stainless-*, openai-*): whatever the page asks to send is
    // allowed; the key in Authorization is what is checked.
    if (typeof asked === 'string' && asked !== '') void reply.header('access-control-allow-headers', asked);
    if (origins !== 'any')
      void reply.header('vary', 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers');
    return reply.send();
  });
}
