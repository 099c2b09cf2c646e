import type { FastifyInstance } from 'fastify';
import { AppError } from '../http/errors.ts';
import type { Metrics } from './metrics.ts';
import { scrapeAuthorized, scrapeRefused } from '../http/metrics-server.ts';

/**
 * Request counts and latencies by route pattern, and the limits' refusals, recorded around every
 * request. Registered before authentication so refused requests are counted too.
 */
export function installHttpMetrics(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onRequest', async (request, reply) => {
    // On the socket's close, so hijacked streams count with their full length; 499 (as nginx
    // logs it) when the client left before the response was complete.
    reply.raw.once('close', () => {
      const status = reply.raw.writableFinished ? reply.raw.statusCode : 499;
      metrics.request(request.routeOptions.url ?? 'unmatched', request.method, status, reply.elapsedTime / 1000);
    });
  });
  app.addHook('onError', async (_request, _reply, error) => {
    // An upstream's own 429 passed through is the provider's limit, not ours.
    if (!(error instanceof AppError) || error.upstream !== undefined) return;
    if (error.code === 'rate_limit_exceeded') metrics.rejected('rate_limit');
    else if (error.code === 'quota_exceeded') metrics.rejected('quota');
  });
}

/** `GET /metrics` (Prometheus text format), outside /api/v1 and the OpenAPI document, behind its own token. */
export function metricsRoutes(metrics: Metrics, token: string) {
  return async (app: FastifyInstance) => {
    app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
      if (!scrapeAuthorized(request.headers.authorization, token)) {
        return reply.code(401).header('www-authenticate', 'Bearer').send(scrapeRefused());
      }
      return reply.type(metrics.contentType).send(await metrics.render());
    });
  };
}
