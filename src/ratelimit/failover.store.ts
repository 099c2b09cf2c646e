import type { Logger } from 'pino';
import { AppError } from '../errors.ts';
import type { LimitWindow, RateLimitStore } from './ratelimit.ts';

export type RedisFailureMode = 'local' | 'closed';

const PROBE_INTERVAL_MS = 1_000;
const PROBE_SUBJECT = 'ragport:store-probe';
const PROBE_WINDOWS: readonly LimitWindow[] = [{ name: 'minute', seconds: 60, limit: 2 ** 31, kind: 'rate' }];

/**
 * Wraps the shared store. When it fails, `local` keeps serving with per-instance limits (each
 * instance enforces the full limit on its own traffic), `closed` refuses requests with 503.
 * Either way a request waits at most the shared store's command timeout.
 */
export function withFailover(
  shared: RateLimitStore,
  local: RateLimitStore,
  mode: RedisFailureMode,
  logger: Logger,
): RateLimitStore {
  let degradedSince: number | null = null;
  let probing: NodeJS.Timeout | undefined;

  const recovered = () => {
    if (degradedSince === null) return;
    logger.warn({ store: shared.name }, 'rate-limit store recovered');
    degradedSince = null;
    clearInterval(probing);
    probing = undefined;
  };
  // While degraded the store is asked again every second, requests or not: recovery seen only by
  // a request left /readyz failing for good behind a load balancer that sends none to an instance
  // not ready (with RATE_LIMIT_REDIS_FAILURE=closed, 40 s and counting after Redis was back).
  // A count, not a read: a Redis that answers reads but refuses writes (out of memory, a replica
  // after a failover) refuses every request, and a read had it reported ready.
  const probe = () => {
    shared
      .consume(PROBE_SUBJECT, PROBE_WINDOWS, Date.now())
      .then(recovered)
      .catch(() => undefined);
  };

  const attempt = async <T>(op: (store: RateLimitStore) => Promise<T>): Promise<T> => {
    try {
      const result = await op(shared);
      recovered();
      return result;
    } catch (error) {
      if (degradedSince === null) {
        degradedSince = Date.now();
        logger.error({ err: error, store: shared.name, mode }, 'rate-limit store unavailable');
        probing ??= setInterval(probe, PROBE_INTERVAL_MS);
        probing.unref();
      }
      if (mode === 'closed') {
        throw new AppError({ code: 'service_unavailable', message: 'Rate limiting is unavailable', cause: error });
      }
      return op(local);
    }
  };

  return {
    name: shared.name,
    ...(shared.refusals === undefined ? {} : { refusals: shared.refusals }),
    consume: (subject: string, windows: readonly LimitWindow[], nowMs: number) =>
      attempt((s) => s.consume(subject, windows, nowMs)),
    peek: (subject: string, windows: readonly LimitWindow[], nowMs: number) =>
      attempt((s) => s.peek(subject, windows, nowMs)),
    health: () => {
      const state = shared.health();
      if (state.ok && degradedSince === null) return state;
      const fallback = mode === 'local' ? 'limits enforced per instance' : 'requests refused';
      // Connected but failing (commands time out or are refused): say so, not just "ready".
      const why = state.ok ? `${state.detail}, but its commands fail` : state.detail;
      return { ok: false, detail: `${why}; ${fallback}` };
    },
    close: async () => {
      clearInterval(probing);
      await Promise.all([shared.close(), local.close()]);
    },
  };
}
