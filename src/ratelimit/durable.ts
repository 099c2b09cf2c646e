import type { Logger } from 'pino';
import type { Clock } from '../clock.ts';
import type { Db } from '../db/client.ts';
import { sql } from '../db/orm.ts';
import { runInBackground } from '../db/priority.ts';
import { rateLimitCounters } from '../db/schema/ratelimit.ts';
import type { CounterSnapshot, MemoryStore } from './memory.store.ts';

export interface DurableCountersOptions {
  store: MemoryStore;
  db: Db;
  logger: Logger;
  clock: Clock;
  /** How often counted requests are written (as usage is): a crash loses at most this much. */
  intervalMs: number;
}

/** Rows per statement: three parameters each, far below any driver's limit. */
const BATCH = 1_000;

/**
 * Keeps the in-process store's hour, day and daily-quota counters in the database, so a restart
 * (a deploy, a crash) does not hand every key fresh windows: without Redis, a key with
 * `requests_per_day: 1000` got 1,000 more after each restart. `load` seeds the store with the
 * counters of windows still running; then every `intervalMs` the counters counted since are
 * written (the count only grows within a window, so the greater count wins: several instances
 * without Redis each keep their own counts, and a restarted one takes the highest). `close`
 * writes the last ones. Off the request path: a request never waits for this.
 */
export function createDurableCounters({ store, db, logger, clock, intervalMs }: DurableCountersOptions) {
  let failed: CounterSnapshot[] = [];
  let chain: Promise<void> = Promise.resolve();

  const write = async () => {
    const latest = new Map<string, CounterSnapshot>();
    for (const c of [...failed, ...store.takeChanged()]) {
      const seen = latest.get(c.key);
      if (seen === undefined || seen.count < c.count) latest.set(c.key, c);
    }
    failed = [];
    const rows = [...latest.values()];
    if (rows.length === 0) return;
    try {
      await runInBackground(async () => {
        for (let i = 0; i < rows.length; i += BATCH) {
          await db
            .insert(rateLimitCounters)
            .values(
              rows.slice(i, i + BATCH).map((r) => ({ counterKey: r.key, count: r.count, expiresAtMs: r.expiresAtMs })),
            )
            .onConflictDoUpdate({
              target: rateLimitCounters.counterKey,
              set: { count: sql`greatest(${rateLimitCounters.count}, excluded.count)` },
            });
        }
        await db.delete(rateLimitCounters).where(sql`${rateLimitCounters.expiresAtMs} <= ${clock()}`);
      });
    } catch (error) {
      failed = rows;
      logger.error({ err: error, counters: rows.length }, 'rate-limit counters not saved; kept for the next write');
    }
  };

  const flush = (): Promise<void> => {
    chain = chain.then(write);
    return chain;
  };

  let timer: NodeJS.Timeout | undefined;
  return {
    /** Seeds the store with the counters of windows still running, then writes every `intervalMs`. */
    async load(): Promise<void> {
      const now = clock();
      const rows = await db
        .select()
        .from(rateLimitCounters)
        .where(sql`${rateLimitCounters.expiresAtMs} > ${now}`);
      store.seed(
        rows.map((r) => ({ key: r.counterKey, count: r.count, expiresAtMs: r.expiresAtMs })),
        now,
      );
      timer = setInterval(() => void flush(), intervalMs);
      timer.unref();
    },
    flush,
    /** Stops the timer and writes what is left. */
    async close(): Promise<void> {
      clearInterval(timer);
      await flush();
    },
  };
}
