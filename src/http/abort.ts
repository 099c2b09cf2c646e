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
 * What to abort when a shutdown signal fires, in a Set: one listener on the signal itself.
 * EventTarget checks every registered listener on each add and remove, so a thousand open streams
 * each adding their own made every new request walk the thousand (profiled at 1,000 streams).
 */
const onShutdown = new WeakMap<AbortSignal, Set<() => void>>();

function shutdownHooks(shutdown: AbortSignal): Set<() => void> {
  let hooks = onShutdown.get(shutdown);
  if (!hooks) {
    const created = new Set<() => void>();
    shutdown.addEventListener('abort', () => created.forEach((hook) => hook()), { once: true });
    onShutdown.set(shutdown, created);
    hooks = created;
  }
  return hooks;
}

/**
 * Aborts `controller` when the server's shutdown deadline passes while this response is open.
 * The hook goes with the response, so a long-lived server keeps none per request.
 */
function abortOnShutdown(reply: FastifyReply, controller: AbortController): void {
  const shutdown = reply.server.shutdownSignal;
  const abort = () => controller.abort(new Error('server shutting down'));
  if (shutdown.aborted) return abort();
  const hooks = shutdownHooks(shutdown);
  hooks.add(abort);
  reply.raw.once('close', () => hooks.delete(abort));
}

/** What a stream cut by the shutdown deadline reports in-band before `[DONE]`. */
export const shuttingDown = () =>
  new AppError({ code: 'service_unavailable', message: 'The server is shutting down; retry the request' });
