import type { FastifyReply } from 'fastify';
import { AppError } from './errors.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** Aborted when the shutdown deadline passes: streams still open end with an error event. */
    shutdownSignal: AbortSignal;
  }
}

/**
 * A signal aborted when the client goes away before the response has been sent, or the shutdown
 * deadline passes: every route that waits on work (an upstream call, a stream, a sandbox run, a
 * wait for a document) hands it on, so nothing runs for a client that left. "Sent" is
 * `writableEnded` (we called end()), not `writableFinished` (the bytes were flushed): a close after
 * the last write has nothing left to cancel.
 */
export function clientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableEnded) controller.abort(new Error('client disconnected'));
  });
  abortOnShutdown(reply, controller);
  return controller.signal;
}

/**
 * Aborts `controller` when the server's shutdown deadline passes while this response is open.
 * The listener goes with the response, so a long-lived server keeps none per request.
 */
function abortOnShutdown(reply: FastifyReply, controller: AbortController): void {
  const shutdown = reply.server.shutdownSignal;
  const abort = () => controller.abort(new Error('server shutting down'));
  if (shutdown.aborted) return abort();
  shutdown.addEventListener('abort', abort, { once: true });
  reply.raw.once('close', () => shutdown.removeEventListener('abort', abort));
}

/** What a stream cut by the shutdown deadline reports in-band before `[DONE]`. */
export const shuttingDown = () =>
  new AppError({ code: 'service_unavailable', message: 'The server is shutting down; retry the request' });
