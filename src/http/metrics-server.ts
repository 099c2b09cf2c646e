import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { AppError, notFound, renderError } from './errors.ts';

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Whether an Authorization header carries the scrape token; constant time in the token. */
export function scrapeAuthorized(header: string | undefined, token: string): boolean {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? '');
  return match?.[1] !== undefined && timingSafeEqual(digest(match[1]), digest(token));
}

export const scrapeRefused = () =>
  renderError(new AppError({ code: 'invalid_api_key', message: 'Invalid or missing metrics token' }), 'structured');

export interface MetricsServer {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * `/metrics` and `/healthz` on their own port: the standalone worker has no other HTTP server (its
 * container healthcheck needs one), and a server with METRICS_PORT keeps the scrape off the port
 * its clients reach.
 */
export async function startMetricsServer(options: {
  host: string;
  port: number;
  /** Without it the port serves only /healthz (a worker's liveness probe). */
  token: string | undefined;
  /** The process's registry (src/metrics/): its text exposition and that text's content type. */
  metrics: { render(): Promise<string>; readonly contentType: string };
  logger: Logger;
}): Promise<MetricsServer> {
  const { metrics, token, logger } = options;
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, type: string, body: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': type, ...headers });
      res.end(body);
    };
    // HEAD as GET, as on the main port (Node leaves the body out).
    const reading = req.method === 'GET' || req.method === 'HEAD';
    if (reading && path === '/healthz') return send(200, 'application/json', '{"status":"ok"}');
    if (!reading || path !== '/metrics' || token === undefined) {
      return send(404, 'application/json', JSON.stringify(renderError(notFound('Not found'), 'structured')));
    }
    if (!scrapeAuthorized(req.headers.authorization, token)) {
      return send(401, 'application/json', JSON.stringify(scrapeRefused()), { 'www-authenticate': 'Bearer' });
    }
    metrics.render().then(
      (text) => send(200, metrics.contentType, text),
      (error: unknown) => {
        logger.error({ err: error }, 'metrics scrape failed');
        send(500, 'text/plain', 'metrics unavailable\n');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
