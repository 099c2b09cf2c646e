import { counterKey, outcomeFrom, type LimitOutcome, type LimitWindow, type RateLimitStore } from './ratelimit.ts';

interface Counter {
  count: number;
  expiresAtMs: number;
}

/** In-process store for a single instance. JavaScript runs this synchronously, hence atomically. */
export function createMemoryStore(): RateLimitStore {
  const counters = new Map<string, Counter>();
  let lastSweepMs = 0;

  const sweep = (nowMs: number) => {
    if (nowMs - lastSweepMs < 60_000) return;
    lastSweepMs = nowMs;
    for (const [key, counter] of counters) if (counter.expiresAtMs <= nowMs) counters.delete(key);
  };

  const read = (key: string, nowMs: number): number => {
    const counter = counters.get(key);
    return counter === undefined || counter.expiresAtMs <= nowMs ? 0 : counter.count;
  };

  const evaluate = (subject: string, windows: readonly LimitWindow[], nowMs: number, count: boolean) => {
    sweep(nowMs);
    const keys = windows.map((w) => counterKey(subject, w, nowMs));
    const before = keys.map((k) => read(k, nowMs));
    const outcome = outcomeFrom(windows, before, nowMs, count);
    if (count && outcome.allowed) {
      keys.forEach((key, i) => {
        const resetAt = outcome.windows[i]?.resetAt ?? 0;
        counters.set(key, { count: (before[i] ?? 0) + 1, expiresAtMs: resetAt * 1000 });
      });
    }
    return outcome;
  };

  return {
    name: 'memory',
    consume: async (subject, windows, nowMs): Promise<LimitOutcome> => evaluate(subject, windows, nowMs, true),
    peek: async (subject, windows, nowMs): Promise<LimitOutcome> => evaluate(subject, windows, nowMs, false),
    health: () => ({ ok: true, detail: 'in-process' }),
    close: async () => {
      counters.clear();
    },
  };
}
