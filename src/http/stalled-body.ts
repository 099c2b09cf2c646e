import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import { AppError, renderError } from './errors.ts';

const stalled = new WeakSet<FastifyRequest>();

/** Whether the request was answered 408 for a body that stopped arriving (see `stalledBodyGuard`). */
export const bodyStalled = (request: FastifyRequest): boolean => stalled.has(request);

/**
 * The app's first onRequest hook: a request body that goes `idleMs` without a byte arriving is
 * answered 408 and its connection closed (`BODY_IDLE_TIMEOUT_MS`, default 60 s: nginx's
 * `client_body_timeout` and Node's `headersTimeout`). Idle time, not a total: a large upload over
 * a slow link takes as long as it needs while it moves; a dead or hostile client cannot hold a
 * connection (and the part of a body it sent) for long. Every route: a JSON body that stops half
 * way is as much a held connection as a document's.
 *
 * While the body arrives, the connection has an idle timeout (Node's socket timeout, which every
 * byte read restarts); once the body is in, the connection's own timeout is back, so the answer
 * may take as long as the route needs (`?wait=true`, a stream). Nothing else is touched:
 * requests without a body, streams and keep-alive keep theirs.
 *
 * The 408 is written here, on the raw response, as Node's own request timeout is answered
 * (`clientErrorHandler`): whoever is reading the body (the multipart parser, fastify's JSON
 * reader) is waiting on it still, so no error can be thrown to fastify's handler. The reply is
 * taken over, so what that reader reports once the connection closes is not sent again; a
 * handler checks `bodyStalled` and lets its error go.
 */
export function stalledBodyGuard(idleMs: number): onRequestHookHandler {
  const message = `The request body stalled: nothing arrived for ${idleMs / 1000} s`;
  return (request, reply, done) => {
    const incoming = request.raw;
    // No body (HTTP/1.1 has one only with Content-Length or Transfer-Encoding: a GET's message is
    // not complete yet at this point either, and its answer may take minutes, `?wait=true`), or
    // all of it arrived with the headers.
    const length = incoming.headers['content-length'];
    const hasBody = incoming.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
    if (!hasBody || incoming.complete) {
      done();
      return;
    }
    const socket = incoming.socket;
    const before = socket.timeout ?? 0;
    const onStall = () => {
      stalled.add(request);
      request.log.info({ idle_ms: idleMs }, 'request body stalled: answered 408, connection closed');
      // Answered already (a refusal sent before the body was read): only the connection is left.
      if (reply.raw.headersSent) {
        socket.destroy();
        return;
      }
      const error = new AppError({ code: 'request_timeout', message });
      const body = JSON.stringify(renderError(error, request.routeOptions.config.family ?? 'structured'));
      reply.hijack();
      // The headers set so far go too: the request id, the key's rate limits.
      for (const [name, value] of Object.entries(reply.getHeaders())) {
        if (value !== undefined) reply.raw.setHeader(name, value);
      }
      reply.raw.writeHead(408, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
        connection: 'close',
      });
      reply.raw.end(body);
    };
    incoming.setTimeout(idleMs, onStall);
    incoming.once('end', () => {
      incoming.removeListener('timeout', onStall);
      socket.setTimeout(before);
    });
    done();
  };
}
