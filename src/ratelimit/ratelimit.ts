/**
 * Fixed windows aligned to the epoch (minutes, hours, UTC days): a window's count drops to zero
 * exactly at its reset time, which is what X-RateLimit-Reset announces. All windows of a subject
 * are checked and counted in one atomic step by every store.
 */

export type WindowName = 'minute' | 'hour' | 'day' | 'quota_day';

export interface LimitWindow {
  name: WindowName;
  seconds: number;
  limit: number;
  /** `rate` windows answer 429; `quota` windows answer 403. */
  kind: 'rate' | 'quota';
}

export interface WindowState {
  name: WindowName;
  kind: 'rate' | 'quota';
  limit: number;
  used: number;
  remaining: number;
  /** Unix seconds at which this window's count drops. */
  resetAt: number;
}

export interface LimitOutcome {
  allowed: boolean;
  windows: WindowState[];
}

/**
 * How instances sharing a store tell each other which subjects they refuse and until when (an
 * address over the unauthenticated limit): each keeps the refusal in memory, so that a valid key
 * from that address is refused without a store round trip, on every instance alike.
 */
export interface RefusalChannel {
  /** Best effort: an instance that misses it still refuses the subject after its own refusal. */
  announce(subject: string, untilMs: number): void;
  subscribe(listener: (subject: string, untilMs: number) => void): void;
}

export interface RateLimitStore {
  readonly name: string;
  /** A shared store's channel between instances; absent on a store of one instance. */
  readonly refusals?: RefusalChannel;
  /** Counts one request in every window if none is exhausted; counts nothing otherwise. */
  consume(subject: string, windows: readonly LimitWindow[], nowMs: number): Promise<LimitOutcome>;
  /** The current state without counting. */
  peek(subject: string, windows: readonly LimitWindow[], nowMs: number): Promise<LimitOutcome>;
  /** Whether the store currently works as configured (false: degraded or failing). */
  health(): { ok: boolean; detail: string };
  close(): Promise<void>;
}

export const windowStart = (window: LimitWindow, nowMs: number): number => {
  const nowSec = Math.floor(nowMs / 1000);
  return nowSec - (nowSec % window.seconds);
};

export const counterKey = (subject: string, window: LimitWindow, nowMs: number): string =>
  // The hash tag keeps all windows of a subject in one Redis Cluster slot, so one script can touch them.
  `rl:{${subject}}:${window.name}:${windowStart(window, nowMs)}`;

/**
 * Builds the outcome from the counts seen before this request; `counting` says whether an
 * allowed request was added to them (consume) or not (peek).
 */
export function outcomeFrom(
  windows: readonly LimitWindow[],
  countsBefore: readonly number[],
  nowMs: number,
  counting: boolean,
): LimitOutcome {
  const allowed = windows.every((w, i) => (countsBefore[i] ?? 0) < w.limit);
  const states = windows.map((w, i) => {
    const used = (countsBefore[i] ?? 0) + (allowed && counting ? 1 : 0);
    return {
      name: w.name,
      kind: w.kind,
      limit: w.limit,
      used,
      remaining: Math.max(0, w.limit - used),
      resetAt: windowStart(w, nowMs) + w.seconds,
    };
  });
  return { allowed, windows: states };
}

export type RateLimitHeaders = Record<'x-ratelimit-limit' | 'x-ratelimit-remaining' | 'x-ratelimit-reset', string>;

/**
 * The window a client should watch: when blocked, the exhausted one that resets last (nothing
 * passes before it resets); otherwise the one with the fewest requests left, as the contract
 * says, the daily request quota included. A key with no rate window (enterprise without
 * `rate_limits`, the bootstrap admin key) reports its daily request quota, which is always
 * counted (unbounded when no quota is set): every authenticated answer carries the headers.
 * Before, a quota was reported only without rate windows: a key refused by its daily quota was
 * told `Limit 60, Remaining 58` of its minute.
 */
export function decisiveWindow(outcome: LimitOutcome): WindowState | undefined {
  const rate = outcome.windows;
  const exhausted = rate.filter((w) => w.remaining === 0 && !outcome.allowed);
  if (exhausted.length > 0) return exhausted.reduce((a, b) => (b.resetAt > a.resetAt ? b : a));
  return rate.reduce<WindowState | undefined>(
    (best, w) =>
      best === undefined || w.remaining < best.remaining || (w.remaining === best.remaining && w.resetAt < best.resetAt)
        ? w
        : best,
    undefined,
  );
}

/** The window whose exhaustion refused the request, preferring a rate window over a quota. */
export function blockingWindow(outcome: LimitOutcome): WindowState | undefined {
  if (outcome.allowed) return undefined;
  const exhausted = outcome.windows.filter((w) => w.used >= w.limit);
  const rate = exhausted.filter((w) => w.kind === 'rate');
  const pool = rate.length > 0 ? rate : exhausted;
  return pool.reduce<WindowState | undefined>((a, b) => (a === undefined || b.resetAt > a.resetAt ? b : a), undefined);
}

export function headersFor(window: WindowState): RateLimitHeaders {
  return {
    'x-ratelimit-limit': String(window.limit),
    'x-ratelimit-remaining': String(window.remaining),
    'x-ratelimit-reset': String(window.resetAt),
  };
}
