import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { Db } from '../db/client.ts';

export interface UsageEntry {
  keyId: string;
  model: string;
  promptTokens: number;
  completionTokens: number;
}

export interface UsageRecorder {
  /** Counts one request; never waits for the database. */
  record(entry: UsageEntry): void;
  /** Writes everything counted so far. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

interface Pending {
  keyId: string;
  day: string;
  model: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
}

/**
 * Aggregates usage in memory per key, day and model and upserts it in one statement every
 * `intervalMs`. A failed write keeps the counts for the next attempt; close() writes the rest.
 */
export function createUsageRecorder(
  db: Db,
  logger: Logger,
  options: { intervalMs?: number; clock?: () => number } = {},
): UsageRecorder {
  const clock = options.clock ?? Date.now;
  let pending = new Map<string, Pending>();
  let flushing: Promise<void> = Promise.resolve();

  const write = async (batch: Map<string, Pending>) => {
    if (batch.size === 0) return;
    const rows = [...batch.values()];
    const values = sql.join(
      rows.map(
        (r) => sql`(${r.keyId}, ${r.day}::date, ${r.model}, ${r.requests}, ${r.promptTokens}, ${r.completionTokens})`,
      ),
      sql`, `,
    );
    await db.execute(sql`
      insert into usage_daily (key_id, day, model, requests, prompt_tokens, completion_tokens)
      values ${values}
      on conflict (key_id, day, model) do update set
        requests = usage_daily.requests + excluded.requests,
        prompt_tokens = usage_daily.prompt_tokens + excluded.prompt_tokens,
        completion_tokens = usage_daily.completion_tokens + excluded.completion_tokens`);
  };

  const merge = (into: Map<string, Pending>, from: Map<string, Pending>) => {
    for (const [key, p] of from) {
      const existing = into.get(key);
      if (existing) {
        existing.requests += p.requests;
        existing.promptTokens += p.promptTokens;
        existing.completionTokens += p.completionTokens;
      } else into.set(key, p);
    }
  };

  const flush = () => {
    flushing = flushing.then(async () => {
      const batch = pending;
      pending = new Map();
      try {
        await write(batch);
      } catch (error) {
        logger.warn({ err: error, rows: batch.size }, 'usage flush failed; will retry');
        merge(pending, batch);
      }
    });
    return flushing;
  };

  const timer = setInterval(() => void flush(), options.intervalMs ?? 1_000);
  timer.unref();

  return {
    record(entry) {
      const day = new Date(clock()).toISOString().slice(0, 10);
      const key = `${entry.keyId}\u0000${day}\u0000${entry.model}`;
      const p = pending.get(key) ?? {
        keyId: entry.keyId,
        day,
        model: entry.model,
        requests: 0,
        promptTokens: 0,
        completionTokens: 0,
      };
      p.requests += 1;
      p.promptTokens += entry.promptTokens;
      p.completionTokens += entry.completionTokens;
      pending.set(key, p);
    },
    flush,
    async close() {
      clearInterval(timer);
      await flush();
    },
  };
}
