import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { failureFrom, UpstreamFailure, type ChatProvider } from './providers/provider.ts';
import type { Clock } from '../clock.ts';

export interface RetryPolicy {
  maxRetries: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

export interface BreakerPolicy {
  failureThreshold: number;
  cooldownMs: number;
}

export type BreakerState = 'closed' | 'open' | 'half_open';

/**
 * Per-provider circuit breaker: after `failureThreshold` consecutive failures the provider is
 * skipped for `cooldownMs`; then one trial request decides whether it closes again.
 */
export class CircuitBreaker {
  private failures = 0;
  private openedAt: number | null = null;
  private trialInFlight = false;
  private readonly policy: BreakerPolicy;
  private readonly clock: Clock;

  constructor(policy: BreakerPolicy, clock: Clock) {
    this.policy = policy;
    this.clock = clock;
  }

  get state(): BreakerState {
    if (this.openedAt === null) return 'closed';
    return this.clock() - this.openedAt < this.policy.cooldownMs ? 'open' : 'half_open';
  }

  /** Whether a request may go to the provider now; in half-open state, one at a time. */
  allow(): boolean {
    const state = this.state;
    if (state === 'closed') return true;
    if (state === 'open' || this.trialInFlight) return false;
    this.trialInFlight = true;
    return true;
  }

  success(): void {
    this.failures = 0;
    this.openedAt = null;
    this.trialInFlight = false;
  }

  failure(): void {
    this.failures++;
    if (this.trialInFlight || this.failures >= this.policy.failureThreshold) this.openedAt = this.clock();
    this.trialInFlight = false;
  }

  /** How long until the provider may be tried again: 0 unless the breaker is open. */
  reopensInMs(): number {
    if (this.openedAt === null) return 0;
    return Math.max(0, this.openedAt + this.policy.cooldownMs - this.clock());
  }

  /** The request ended without telling anything about the provider's health (aborted, 429). */
  release(): void {
    this.trialInFlight = false;
  }
}

type Verdict = 'client' | 'retry' | 'failover';

/** What to do after a failure: hand a client error back, retry the same provider, or move on. */
export function verdictOf(failure: UpstreamFailure): Verdict {
  switch (failure.kind) {
    case 'timeout':
    case 'aborted':
    case 'unavailable':
      return 'failover';
    case 'connection':
    case 'protocol':
      return 'retry';
    case 'status': {
      const status = failure.status ?? 502;
      if (status >= 500 || status === 408 || status === 409 || status === 429) return 'retry';
      // A provider that refuses its own credentials is misconfigured: another may serve.
      if (status === 401 || status === 403) return 'failover';
      return 'client';
    }
  }
}

/** Exponential backoff with equal jitter; an upstream's Retry-After wins when it is short enough. */
export function backoffDelay(attempt: number, policy: RetryPolicy, retryAfterMs?: number): number | undefined {
  if (retryAfterMs !== undefined) return retryAfterMs <= policy.maxDelayMs ? retryAfterMs : undefined;
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

export interface Candidate {
  provider: ChatProvider;
  breaker: CircuitBreaker;
  maxRetries: number;
}

export interface FailoverContext {
  retry: RetryPolicy;
  signal: AbortSignal | undefined;
  logger: Logger;
  /** What the request is for, in failure messages: e.g. model `gpt-4o`. */
  subject: string;
  /** Every failed attempt except the caller's own abort (metrics). */
  onFailure?: (failure: UpstreamFailure) => void;
}

/** The failover context of one upstream call for `model`, shared by chat and embeddings. */
export function failoverContext(
  base: { retry: RetryPolicy; logger: Logger; onFailure?: FailoverContext['onFailure'] | undefined },
  model: string,
  signal: AbortSignal | undefined,
): FailoverContext {
  return {
    retry: base.retry,
    signal,
    logger: base.logger,
    subject: `model ${model}`,
    ...(base.onFailure ? { onFailure: base.onFailure } : {}),
  };
}

/**
 * Runs `attempt` against the candidates in order: retries with backoff on connection errors, 429
 * and 5xx, fails over to the next provider, skips providers whose breaker is open. Client errors
 * (other 4xx) and aborts end the loop at once.
 */
export async function withFailover<T>(
  candidates: readonly Candidate[],
  attempt: (provider: ChatProvider) => Promise<T>,
  context: FailoverContext,
): Promise<T> {
  let last: UpstreamFailure | undefined;
  for (const { provider, breaker, maxRetries } of candidates) {
    if (!breaker.allow()) continue;
    for (let retry = 0; ; retry++) {
      try {
        const result = await attempt(provider);
        breaker.success();
        return result;
      } catch (error) {
        const failure = failureFrom(provider.name, error, context.signal);
        const verdict = verdictOf(failure);
        if (failure.kind === 'aborted' && context.signal?.aborted === true) {
          breaker.release();
          throw failure;
        }
        context.onFailure?.(failure);
        if (verdict === 'client') {
          breaker.success();
          throw failure;
        }
        if (failure.status === 429) breaker.release();
        else breaker.failure();
        last = failure;
        context.logger.warn(
          { provider: provider.name, kind: failure.kind, status: failure.status, retry, breaker: breaker.state },
          `upstream call failed: ${failure.message}`,
        );
        if (verdict !== 'retry' || retry >= maxRetries || breaker.state === 'open') break;
        const delay = backoffDelay(retry, context.retry, failure.retryAfterMs);
        if (delay === undefined) break;
        try {
          await sleep(delay, undefined, context.signal ? { signal: context.signal } : {});
        } catch (sleepError) {
          throw failureFrom(provider.name, sleepError, context.signal);
        }
        if (!breaker.allow()) break;
      }
    }
  }
  const failure =
    last ??
    new UpstreamFailure({
      kind: 'unavailable',
      provider: candidates.map((c) => c.provider.name).join(','),
      message: `No provider for ${context.subject} is available right now: each one failed repeatedly and is paused (circuit breaker open)`,
    });
  // Every breaker open now: say when the first one lets a trial through, for callers that retry
  // later on their own (the ingestion queue) rather than at once into open breakers.
  const reopensIn = Math.min(...candidates.map((c) => c.breaker.reopensInMs()));
  if (candidates.length > 0 && reopensIn > 0) failure.availableInMs = reopensIn;
  throw failure;
}
