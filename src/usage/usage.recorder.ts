import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { UsageDelta, UsageRepository } from './usage.repository.ts';
import type { Clock } from '../clock.ts';

export interface UsageEvent {
  keyId: string;
  model: string;
  promptTokens: number;
  completionTokens: number;
}

/** Where served requests are counted. `record` never waits and never throws. */
export interface UsageRecorder {
  record(event: UsageEvent): void;
  /** Tokens this process recorded for the key since it started, written or not. */
  tokensRecorded(keyId: string): number;
  /** Calls this process recorded for the key since it started. */
  callsRecorded(keyId: string): number;
  /** Tokens recorded for the key and not yet in the database. */
  tokensPending(keyId: string): number;
  /** Writes everything recorded so far; rejects if the write fails (the counts stay queued). */
  flush(): Promise<void>;
  /** Stops the timer and writes what is left, retrying a few times. */
  close(): Promise<void>;
}

export interface BatchedRecorderOptions {
  repo: Pick<UsageRepository, 'add'>;
  clock: Clock;
  logger: Logger;
  /** Write at least this often while there is something to write. */
  flushIntervalMs: number;
  /** Write as soon as this many (key, day, model) rows are waiting. */
  maxPendingRows: number;
}

const DAY_MS = 86_400_000;

/**
 * Counts are non-negative integers: one that is not (an upstream's 1.5 or -1000 that got past its
 * caller) would fail the whole batch's upsert, every key's counts in it, at every flush after.
 */
const countOf = (n: number) => (Number.isSafeInteger(n) && n >= 0 ? n : 0);

/**
 * Counts in memory per (key, UTC day, model) and writes them in one upsert every
 * `flushIntervalMs` or `maxPendingRows`: no database round trip on the request path. A failed
 * write puts its counts back and is retried with the next one.
 */
export function createBatchedUsageRecorder(options: BatchedRecorderOptions): UsageRecorder {
  const { repo, clock, logger } = options;
  let pending = new Map<string, UsageDelta>();
  const recorded = new Map<string, number>();
  const calls = new Map<string, number>();
  const waiting = new Map<string, number>();
  let dayEnd = 0;
  let day = '';
  let chain: Promise<void> = Promise.resolve();
  let queued = false;
  let closed = false;

  const currentDay = (now: number): string => {
    if (now >= dayEnd || now < dayEnd - DAY_MS) {
      const start = now - (now % DAY_MS);
      day = new Date(start).toISOString().slice(0, 10);
      dayEnd = start + DAY_MS;
    }
    return day;
  };

  const merge = (delta: UsageDelta) => {
    const id = `${delta.keyId}\u0000${delta.day}\u0000${delta.model}`;
    const row = pending.get(id);
    if (row === undefined) pending.set(id, { ...delta });
    else {
      row.requests += delta.requests;
      row.promptTokens += delta.promptTokens;
      row.completionTokens += delta.completionTokens;
    }
  };

  const write = async (): Promise<void> => {
    queued = false;
    if (pending.size === 0) return;
    const batch = [...pending.values()];
    pending = new Map();
    try {
      await repo.add(batch);
    } catch (error) {
      for (const delta of batch) merge(delta);
      logger.error({ err: error, rows: batch.length }, 'usage flush failed; counts kept for the next flush');
      throw error;
    }
    for (const delta of batch) {
      const left = (waiting.get(delta.keyId) ?? 0) - delta.promptTokens - delta.completionTokens;
      if (left > 0) waiting.set(delta.keyId, left);
      else waiting.delete(delta.keyId);
    }
  };

  const flush = (): Promise<void> => {
    const next = chain.then(write);
    chain = next.catch(() => undefined);
    return next;
  };

  const background = () => {
    if (queued) return;
    queued = true;
    flush().catch(() => undefined);
  };

  const timer = setInterval(() => {
    if (pending.size > 0) background();
  }, options.flushIntervalMs);
  timer.unref();

  return {
    record(raw) {
      const event = {
        ...raw,
        promptTokens: countOf(raw.promptTokens),
        completionTokens: countOf(raw.completionTokens),
      };
      if (event.promptTokens !== raw.promptTokens || event.completionTokens !== raw.completionTokens) {
        logger.warn(
          {
            key_id: raw.keyId,
            model: raw.model,
            prompt_tokens: raw.promptTokens,
            completion_tokens: raw.completionTokens,
          },
          'usage: a token count that is not a non-negative integer was counted as 0',
        );
      }
      const tokens = event.promptTokens + event.completionTokens;
      recorded.set(event.keyId, (recorded.get(event.keyId) ?? 0) + tokens);
      calls.set(event.keyId, (calls.get(event.keyId) ?? 0) + 1);
      waiting.set(event.keyId, (waiting.get(event.keyId) ?? 0) + tokens);
      merge({
        keyId: event.keyId,
        day: currentDay(clock()),
        model: event.model,
        requests: 1,
        promptTokens: event.promptTokens,
        completionTokens: event.completionTokens,
      });
      if (closed || pending.size >= options.maxPendingRows) background();
    },
    tokensRecorded: (keyId) => recorded.get(keyId) ?? 0,
    callsRecorded: (keyId) => calls.get(keyId) ?? 0,
    tokensPending: (keyId) => waiting.get(keyId) ?? 0,
    flush,
    async close() {
      closed = true;
      clearInterval(timer);
      for (let attempt = 1; ; attempt++) {
        try {
          await flush();
          return;
        } catch (error) {
          if (attempt >= 5) {
            logger.error({ err: error, rows: [...pending.values()] }, 'usage counts could not be written at close');
            return;
          }
          await sleep(200 * attempt);
        }
      }
    },
  };
}
