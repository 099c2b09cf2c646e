import type { Logger } from 'pino';
import { withFailover, type RedisFailureMode } from './failover.store.ts';
import { createMemoryStore } from './memory.store.ts';
import type { RateLimitStore } from './ratelimit.ts';
import { createRedisStore } from './redis.store.ts';

export interface LimiterOptions {
  redisUrl: string | undefined;
  redisFailureMode: RedisFailureMode;
  logger: Logger;
}

const CONNECT_WAIT_MS = 3_000;

/**
 * In-process counters for one instance; Redis, shared by every instance, when REDIS_URL is set.
 * Start-up waits briefly for Redis; if it is not there yet the failure mode applies until it is.
 */
export async function createLimiter(options: LimiterOptions): Promise<RateLimitStore> {
  if (options.redisUrl === undefined) return createMemoryStore();
  const redis = createRedisStore({ url: options.redisUrl });
  if (!(await redis.connected(CONNECT_WAIT_MS))) {
    options.logger.warn(
      { mode: options.redisFailureMode },
      'Redis not reachable at start-up; rate limits degraded until it is',
    );
  }
  return withFailover(redis, createMemoryStore(), options.redisFailureMode, options.logger);
}
