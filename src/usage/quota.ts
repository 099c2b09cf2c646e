import type { UsageRecorder } from './usage.recorder.ts';
import type { UsageRepository } from './usage.repository.ts';
import type { Clock } from '../clock.ts';
import { AppError } from '../errors.ts';

export interface TokenQuotaOptions {
  repo: Pick<UsageRepository, 'usageSince'>;
  recorder: Pick<UsageRecorder, 'tokensRecorded' | 'tokensPending' | 'callsRecorded'>;
  clock: Clock;
  /** How long a database read stays good; local usage is added on top meanwhile. */
  ttlMs: number;
}

interface Entry {
  month: string;
  fetchedAt: number;
  /** Database total at fetch, plus what was pending then, minus the recorder's counter then. */
  base: number;
  /** What the database held at fetch: for a call's expected size before this process saw one. */
  storedTokens: number;
  storedCalls: number;
}

/**
 * A call still counts as in flight this long at most: a reservation whose release was lost (a
 * stream never read) cannot hold a key's quota for longer.
 */
const RESERVATION_MS = 10 * 60_000;

const exceeded = (used: number, tokensPerMonth: number) =>
  new AppError({
    code: 'quota_exceeded',
    message: `Monthly token quota of this API key exceeded (${used} of ${tokensPerMonth})`,
  });

/**
 * Tokens a key used this calendar month (UTC): one database read per key per `ttlMs`, plus what
 * this process recorded since, so the quota holds between flushes without a query per request.
 * Model calls in flight reserve the key's mean call size (see `admitCall`).
 */
export function createTokenQuota({ repo, recorder, clock, ttlMs }: TokenQuotaOptions) {
  const cache = new Map<string, Entry>();
  /** Per key, the calls in flight: the tokens each holds, and when it stops counting if never released. */
  const inFlight = new Map<string, Map<symbol, { tokens: number; until: number }>>();

  const tokensThisMonth = async (keyId: string): Promise<number> => {
    const now = clock();
    const month = new Date(now).toISOString().slice(0, 7);
    const entry = cache.get(keyId);
    if (entry !== undefined && entry.month === month && now - entry.fetchedAt < ttlMs) {
      return entry.base + recorder.tokensRecorded(keyId);
    }
    const counterBefore = recorder.tokensRecorded(keyId);
    const pendingBefore = recorder.tokensPending(keyId);
    const stored = await repo.usageSince(keyId, `${month}-01`);
    const base = stored.tokens + pendingBefore - counterBefore;
    cache.set(keyId, { month, fetchedAt: now, base, storedTokens: stored.tokens, storedCalls: stored.requests });
    return base + recorder.tokensRecorded(keyId);
  };

  /** Tokens a call of this key is expected to take: its mean in this process, else this month's; 0 unknown. */
  const callEstimate = (keyId: string): number => {
    const calls = recorder.callsRecorded(keyId);
    if (calls > 0) return recorder.tokensRecorded(keyId) / calls;
    const entry = cache.get(keyId);
    return entry !== undefined && entry.storedCalls > 0 ? entry.storedTokens / entry.storedCalls : 0;
  };

  return {
    tokensThisMonth,

    /**
     * Admits a model call of a key with a quota and counts it in flight until `release`: refused
     * once the month's tokens reached the quota, or when the calls already in flight and this one
     * would take it there. Each call holds the larger of `expected` (what the caller can tell of
     * this call: its input, its max_tokens) and the key's mean call size. Without this, every call
     * admitted before the first one's tokens were recorded ran: 60 calls at once were served for a
     * quota of 20 calls, and ten concurrent /embeddings calls of 200 tokens for a quota of 100. A
     * call alone is always admitted below the quota, so one at a time a key ends a month above it
     * by at most one call.
     */
    async admitCall(keyId: string, tokensPerMonth: number, expected = 0): Promise<() => void> {
      const used = await tokensThisMonth(keyId);
      if (used >= tokensPerMonth) throw exceeded(used, tokensPerMonth);
      const now = clock();
      let calls = inFlight.get(keyId);
      if (calls === undefined) inFlight.set(keyId, (calls = new Map<symbol, { tokens: number; until: number }>()));
      let held = 0;
      for (const [id, call] of calls) {
        if (call.until <= now) calls.delete(id);
        else held += call.tokens;
      }
      const tokens = Math.max(expected, callEstimate(keyId));
      if (calls.size > 0 && used + held + tokens > tokensPerMonth) {
        throw new AppError({
          code: 'quota_exceeded',
          message:
            `Monthly token quota of this API key would be exceeded by the calls in flight (${used} of ` +
            `${tokensPerMonth} used, ${calls.size} call(s) holding about ${Math.ceil(held)} tokens running, ` +
            `this one about ${Math.ceil(tokens)})`,
        });
      }
      const id = Symbol('call');
      calls.set(id, { tokens, until: now + RESERVATION_MS });
      const running = calls;
      return () => {
        running.delete(id);
        if (running.size === 0 && inFlight.get(keyId) === running) inFlight.delete(keyId);
      };
    },
  };
}

export type TokenQuota = ReturnType<typeof createTokenQuota>;

/** Tokens text is expected to take before it is tokenised: about four characters a token. */
export const expectedTokens = (characters: number) => Math.ceil(characters / 4);

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
  if (used >= tokensPerMonth) throw exceeded(used, tokensPerMonth);
}
