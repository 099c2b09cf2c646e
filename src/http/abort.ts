import type { FastifyReply } from 'fastify';

/** A signal aborted when the client goes away before the response has been sent. */
export function clientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableEnded) controller.abort(new Error('client disconnected'));
  });
  return controller.signal;
}
