import type { UsageRecorder } from './usage.recorder.ts';
import type { UsageRepository } from './usage.repository.ts';
import type { Clock } from '../clock.ts';

export interface TokenQuotaOptions {
  repo: Pick<UsageRepository, 'tokensSince'>;
  recorder: Pick<UsageRecorder, 'tokensRecorded' | 'tokensPending'>;
  clock: Clock;
  /** How long a database read stays good; local usage is added on top meanwhile. */
  ttlMs: number;
}

interface Entry {
  month: string;
  fetchedAt: number;
  /** Database total at fetch, plus what was pending then, minus the recorder's counter then. */
  base: number;
}

/**
 * Tokens a key used this calendar month (UTC): one database read per key per `ttlMs`, plus what
 * this process recorded since, so the quota holds between flushes without a query per request.
 */
export function createTokenQuota({ repo, recorder, clock, ttlMs }: TokenQuotaOptions) {
  const cache = new Map<string, Entry>();
  return {
    async tokensThisMonth(keyId: string): Promise<number> {
      const now = clock();
      const month = new Date(now).toISOString().slice(0, 7);
      const entry = cache.get(keyId);
      if (entry !== undefined && entry.month === month && now - entry.fetchedAt < ttlMs) {
        return entry.base + recorder.tokensRecorded(keyId);
      }
      const counterBefore = recorder.tokensRecorded(keyId);
      const pendingBefore = recorder.tokensPending(keyId);
      const stored = await repo.tokensSince(keyId, `${month}-01`);
      const base = stored + pendingBefore - counterBefore;
      cache.set(keyId, { month, fetchedAt: now, base });
      return base + recorder.tokensRecorded(keyId);
    },
  };
}

export type TokenQuota = ReturnType<typeof createTokenQuota>;
