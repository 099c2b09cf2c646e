import type { UsageRecorder } from './usage.recorder.ts';
import type { UsageRepository } from './usage.repository.ts';
import type { Clock } from '../clock.ts';
import { AppError } from '../errors.ts';

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

/**
 * Refuses a key whose tokens this month reached its `tokensPerMonth` (null: no quota, nothing is
 * read), before any model works for it: chat, /embeddings and /rerank refuse alike.
 */
export async function checkTokenQuota(
  quota: Pick<TokenQuota, 'tokensThisMonth'>,
  keyId: string,
  tokensPerMonth: number | null,
): Promise<void> {
  if (tokensPerMonth === null) return;
  const used = await quota.tokensThisMonth(keyId);
  if (used >= tokensPerMonth) {
    throw new AppError({
      code: 'quota_exceeded',
      message: `Monthly token quota of this API key exceeded (${used} of ${tokensPerMonth})`,
    });
  }
}
