import { counterKey, outcomeFrom, type LimitOutcome, type LimitWindow, type RateLimitStore } from './ratelimit.ts';

interface Counter {
  count: number;
  expiresAtMs: number;
}

/** A counter as it is kept across restarts (`src/ratelimit/durable.ts`). */
export interface CounterSnapshot {
  key: string;
  count: number;
  expiresAtMs: number;
}

/** The in-process store, with what keeping its counters across restarts needs. */
export interface MemoryStore extends RateLimitStore {
  /** Counters of windows of an hour or more counted since the last call (the minute ones go by themselves). */
  takeChanged(): CounterSnapshot[];
  /** Counts kept before a restart; a counter already higher here keeps its own. */
  seed(counters: readonly CounterSnapshot[], nowMs: number): void;
}

export const isMemoryStore = (store: RateLimitStore): store is MemoryStore => 'takeChanged' in store;

/** Windows this long are kept across restarts (`durable.ts`); a minute one is over first. */
const KEPT_FROM_SECONDS = 3_600;

/** In-process store for a single instance. JavaScript runs this synchronously, hence atomically. */
export function createMemoryStore(): MemoryStore {
  const counters = new Map<string, Counter>();
  const changed = new Set<string>();
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
        if ((windows[i]?.seconds ?? 0) >= KEPT_FROM_SECONDS) changed.add(key);
      });
    }
    return outcome;
  };

  return {
    name: 'memory',
    consume: async (subject, windows, nowMs): Promise<LimitOutcome> => evaluate(subject, windows, nowMs, true),
    peek: async (subject, windows, nowMs): Promise<LimitOutcome> => evaluate(subject, windows, nowMs, false),
    health: () => ({ ok: true, detail: 'in-process' }),
    takeChanged() {
      const out: CounterSnapshot[] = [];
      for (const key of changed) {
        const counter = counters.get(key);
        if (counter !== undefined) out.push({ key, count: counter.count, expiresAtMs: counter.expiresAtMs });
      }
      changed.clear();
      return out;
    },
    seed(kept, nowMs) {
      for (const { key, count, expiresAtMs } of kept) {
        if (expiresAtMs <= nowMs) continue;
        if (read(key, nowMs) < count) counters.set(key, { count, expiresAtMs });
      }
    },
    close: async () => {
      counters.clear();
      changed.clear();
    },
  };
}
