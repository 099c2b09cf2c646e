import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AuthOutcome, Clock, KeysService } from '../keys/keys.service.ts';
import { hasScope, type Principal } from '../keys/principal.ts';
import { addressSubject, clientAddress, keySubject, unauthenticatedWindows, windowsFor } from '../ratelimit/policy.ts';
import {
  blockingWindow,
  decisiveWindow,
  headersFor,
  type LimitOutcome,
  type RateLimitStore,
} from '../ratelimit/ratelimit.ts';
import { AppError } from './errors.ts';

export interface AuthDeps {
  keys: KeysService;
  limiter: RateLimitStore;
  clock: Clock;
  unauthenticatedPerMinute: number;
}

const failureMessages: Record<Exclude<AuthOutcome, { ok: true }>['reason'] | 'missing', string> = {
  missing: 'Missing API key: send the header Authorization: Bearer <key>',
  malformed: 'Invalid API key',
  unknown: 'Invalid API key',
  revoked: 'API key has been revoked',
  expired: 'API key has expired',
};

/** Beyond this many blocked addresses, expired ones are dropped as new ones come. */
const MAX_BLOCKED_ADDRESSES = 10_000;
const ADDRESS_PREFIX = addressSubject('');

function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return match?.[1];
}

/**
 * Authentication, rate limiting and the scope check, in that order, before the body is even
 * read. Each route declares its scope in its config; this hook is the only place that checks it.
 */
export function installAuth(app: FastifyInstance, deps: AuthDeps): void {
  const { keys, limiter, clock } = deps;
  const addressWindows = unauthenticatedWindows(deps.unauthenticatedPerMinute);
  // Addresses that used up their failed-auth budget, until the window resets: refused before any
  // key lookup without a store round trip. The shared counter stays the source of truth. With a
  // shared store, an instance that refuses an address tells the others, which refuse its valid
  // keys too (otherwise an instance that had answered the address only with 401s served them).
  const blockedAddresses = new Map<string, number>();
  const block = (address: string, untilMs: number) => {
    if ((blockedAddresses.get(address) ?? 0) >= untilMs) return false;
    if (blockedAddresses.size >= MAX_BLOCKED_ADDRESSES) {
      const now = clock();
      for (const [a, until] of blockedAddresses) if (until <= now) blockedAddresses.delete(a);
    }
    blockedAddresses.set(address, untilMs);
    return true;
  };
  limiter.refusals?.subscribe((subject, untilMs) => {
    if (subject.startsWith(ADDRESS_PREFIX) && untilMs > clock()) block(subject.slice(ADDRESS_PREFIX.length), untilMs);
  });

  const applyHeaders = (reply: FastifyReply, outcome: LimitOutcome) => {
    const window = decisiveWindow(outcome);
    if (window) void reply.headers(headersFor(window));
  };

  const tooMany = (outcome: LimitOutcome, nowMs: number): AppError => {
    const window = blockingWindow(outcome);
    const retryAfter = Math.max(1, (window?.resetAt ?? Math.ceil(nowMs / 1000)) - Math.floor(nowMs / 1000));
    return new AppError({
      code: 'rate_limit_exceeded',
      message: `Rate limit exceeded: ${window?.limit ?? 0} requests per ${window?.name ?? 'window'}. Retry after ${retryAfter} s.`,
      headers: { 'retry-after': String(retryAfter) },
    });
  };

  const refuseUnauthenticated = async (request: FastifyRequest, reply: FastifyReply, message: string) => {
    const now = clock();
    const address = clientAddress(request.ip);
    const outcome = await limiter.consume(addressSubject(address), addressWindows, now);
    applyHeaders(reply, outcome);
    if (!outcome.allowed) {
      const until = (blockingWindow(outcome)?.resetAt ?? 0) * 1000;
      if (block(address, until)) limiter.refusals?.announce(addressSubject(address), until);
      throw tooMany(outcome, now);
    }
    throw new AppError({ code: 'invalid_api_key', message });
  };

  app.decorateRequest('principal', null);

  /** Counts the request in the key's windows (all APIs share them): 429, or 403 over a quota. */
  const admitKey = async (principal: Principal, reply: FastifyReply) => {
    const now = clock();
    const outcome = await limiter.consume(keySubject(principal.keyId), windowsFor(principal), now);
    applyHeaders(reply, outcome);
    if (!outcome.allowed) {
      if (blockingWindow(outcome)?.kind === 'quota') {
        throw new AppError({ code: 'quota_exceeded', message: 'Daily request quota of this API key exceeded' });
      }
      throw tooMany(outcome, now);
    }
  };

  /**
   * The caller a bearer secret names, its request counted against the key; refused (401, counted
   * against the address, 429 once over) when the secret names none.
   */
  const authenticate = async (request: FastifyRequest, reply: FastifyReply, secret: string) => {
    // The address is worked out only while some address is blocked: not on every request.
    const address = blockedAddresses.size > 0 ? clientAddress(request.ip) : undefined;
    const blockedUntil = address === undefined ? undefined : blockedAddresses.get(address);
    if (address !== undefined && blockedUntil !== undefined) {
      const now = clock();
      if (blockedUntil > now) {
        const outcome = await limiter.peek(addressSubject(address), addressWindows, now);
        if (!outcome.allowed) {
          applyHeaders(reply, outcome);
          throw tooMany(outcome, now);
        }
      }
      blockedAddresses.delete(address);
    }

    const auth = await keys.authenticate(secret);
    if (!auth.ok) return refuseUnauthenticated(request, reply, failureMessages[auth.reason]);
    await admitKey(auth.principal, reply);
    return auth.principal;
  };

  app.addHook('onRequest', async (request, reply) => {
    const access = request.routeOptions.config.access;
    const secret = bearerToken(request.headers.authorization);
    // A path no route serves, asked with a key: authenticated as any route is, so a wrong key is
    // a 401 counted against the address (guessing keys there went unthrottled, and the headers of
    // a valid key's 404 told a right guess), a valid one counted against the key with its
    // headers, then the 404. Without a key it is a 404 as it is.
    if (access === undefined && request.is404) {
      if (secret !== undefined) await authenticate(request, reply, secret);
      return;
    }
    if (access === undefined || access === 'public') return;
    if (secret === undefined) return refuseUnauthenticated(request, reply, failureMessages.missing);

    const principal = await authenticate(request, reply, secret);
    if (!hasScope(principal, access)) {
      throw new AppError({
        code: 'insufficient_scope',
        message: `This API key lacks the '${access}' scope required here`,
      });
    }
    request.principal = principal;
  });
}

/** The authenticated caller of a route that declared a scope; the auth hook guarantees it. */
export function principalOf(request: FastifyRequest) {
  if (request.principal === null) throw new AppError({ code: 'invalid_api_key', message: 'Not authenticated' });
  return request.principal;
}
