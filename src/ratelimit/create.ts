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

/** In-process counters for one instance; Redis, shared by every instance, when REDIS_URL is set. */
export function createLimiter(options: LimiterOptions): RateLimitStore {
  if (options.redisUrl === undefined) return createMemoryStore();
  return withFailover(
    createRedisStore({ url: options.redisUrl }),
    createMemoryStore(),
    options.redisFailureMode,
    options.logger,
  );
}
