import { Redis } from 'ioredis';
import {
  counterKey,
  outcomeFrom,
  type LimitOutcome,
  type LimitWindow,
  type RateLimitStore,
  type RefusalChannel,
} from './ratelimit.ts';

/**
 * One script checks every window of a subject and, only if none is exhausted, counts the
 * request in all of them: no interleaving between instances can admit more than the limit.
 * KEYS: one counter per window. ARGV: limit and ttl per window, then 1 to count or 0 to peek.
 * Returns the counts seen before this request.
 */
const script = `
local n = #KEYS
local counts = {}
local allowed = true
for i = 1, n do
  local c = tonumber(redis.call('GET', KEYS[i]) or '0')
  counts[i] = c
  if c >= tonumber(ARGV[2 * i - 1]) then allowed = false end
end
if allowed and ARGV[2 * n + 1] == '1' then
  for i = 1, n do
    if redis.call('INCR', KEYS[i]) == 1 then redis.call('EXPIRE', KEYS[i], ARGV[2 * i]) end
  end
end
return counts
`;

const REFUSALS_CHANNEL = 'ragport:refusals';

function parseRefusal(message: string): { subject: string; until: number } | undefined {
  try {
    const value = JSON.parse(message) as { subject?: unknown; until?: unknown };
    if (typeof value.subject === 'string' && typeof value.until === 'number' && Number.isFinite(value.until)) {
      return { subject: value.subject, until: value.until };
    }
  } catch {
    // Not ours: ignored.
  }
  return undefined;
}

interface ScriptedRedis extends Redis {
  ragportLimit(numKeys: number, ...args: (string | number)[]): Promise<number[]>;
}

export interface RedisStoreOptions {
  url: string;
  /** Milliseconds a command may take before the request gives up on Redis. */
  commandTimeoutMs?: number;
}

export interface RedisStore extends RateLimitStore {
  client: Redis;
  /** Resolves once connected, or after `timeoutMs` (it keeps reconnecting in the background). */
  connected(timeoutMs: number): Promise<boolean>;
}

export function createRedisStore(options: RedisStoreOptions): RedisStore {
  const client = new Redis(options.url, {
    // Fail at once while disconnected instead of queueing: no request may hang on Redis.
    enableOfflineQueue: false,
    commandTimeout: options.commandTimeoutMs ?? 500,
    maxRetriesPerRequest: 0,
    lazyConnect: false,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2_000),
  }) as ScriptedRedis;
  client.defineCommand('ragportLimit', { lua: script });
  // Connection errors surface on the commands; the event would otherwise crash the process.
  client.on('error', () => undefined);

  const run = async (subject: string, windows: readonly LimitWindow[], nowMs: number, count: boolean) => {
    const nowSec = Math.floor(nowMs / 1000);
    const keys = windows.map((w) => counterKey(subject, w, nowMs));
    const args = windows.flatMap((w) => {
      const reset = nowSec - (nowSec % w.seconds) + w.seconds;
      return [w.limit, reset - nowSec + 1];
    });
    const counts = await client.ragportLimit(keys.length, ...keys, ...args, count ? 1 : 0);
    return outcomeFrom(windows, counts, nowMs, count);
  };

  let subscriber: Redis | undefined;
  const listeners = new Set<(subject: string, untilMs: number) => void>();
  const refusals: RefusalChannel = {
    announce: (subject, untilMs) => {
      client.publish(REFUSALS_CHANNEL, JSON.stringify({ subject, until: untilMs })).catch(() => undefined);
    },
    subscribe: (listener) => {
      listeners.add(listener);
      if (subscriber !== undefined) return;
      // A connection of its own (a subscribed one takes no other commands), which queues its
      // SUBSCRIBE until connected and subscribes again after every reconnection.
      subscriber = client.duplicate({ enableOfflineQueue: true, autoResubscribe: true });
      subscriber.on('error', () => undefined);
      subscriber.on('message', (_channel: string, message: string) => {
        const refusal = parseRefusal(message);
        if (refusal !== undefined) for (const l of listeners) l(refusal.subject, refusal.until);
      });
      subscriber.subscribe(REFUSALS_CHANNEL).catch(() => undefined);
    },
  };

  return {
    name: 'redis',
    client,
    refusals,
    consume: (subject, windows, nowMs): Promise<LimitOutcome> => run(subject, windows, nowMs, true),
    peek: (subject, windows, nowMs): Promise<LimitOutcome> => run(subject, windows, nowMs, false),
    health: () => ({ ok: client.status === 'ready', detail: `redis ${client.status}` }),
    connected: async (timeoutMs) => {
      if (client.status === 'ready') return true;
      return new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => {
          client.off('ready', onReady);
          resolve(false);
        }, timeoutMs);
        const onReady = () => {
          clearTimeout(timer);
          resolve(true);
        };
        client.once('ready', onReady);
      });
    },
    close: async () => {
      client.disconnect();
      subscriber?.disconnect();
    },
  };
}
