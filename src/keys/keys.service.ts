import type { ApiKeyRow } from '../db/schema/keys.ts';
import { newId } from '../db/ids.ts';
import { AppError, invalid, notFound } from '../errors.ts';
import { keySubject, windowsFor } from '../ratelimit/policy.ts';
import type { RateLimitStore } from '../ratelimit/ratelimit.ts';
import { createAuthCache, type AuthCache } from './auth-cache.ts';
import type { KeyChanges } from './key-changes.ts';
import type { KeyPatch, KeysRepository } from './keys.repository.ts';
import type { CreateKeyBody, KeyRecord, KeyUsage, UpdateKeyBody } from './keys.schemas.ts';
import {
  coversCollections,
  tierLimits,
  type Principal,
  type Scope,
  type Tier,
  type WindowLimits,
} from './principal.ts';
import { generateSecret, hashSecret, isWellFormedKey, hashesEqual, visiblePrefix } from './secret.ts';

export type { Clock } from '../clock.ts';
import type { Clock } from '../clock.ts';

export type AuthOutcome =
  { ok: true; principal: Principal } | { ok: false; reason: 'malformed' | 'unknown' | 'revoked' | 'expired' };

export const BOOTSTRAP_KEY_ID = 'key_bootstrap_admin';

/**
 * Who manages keys: an admin key's collections (null: every one). A key restricted to collections
 * sees and changes only keys restricted to some of them; the others are reported as missing.
 */
export type KeyManager = Pick<Principal, 'collections'>;

/** The operator at the shell (`npm run keys`): every key. */
export const operator: KeyManager = { collections: null };

export interface KeysServiceDeps {
  repo: KeysRepository;
  limiter: RateLimitStore;
  clock: Clock;
  adminKey: string | undefined;
  /** Keys remembered between requests; without one, every request reads its key. */
  cache?: AuthCache;
  /** On a server: a change is answered once every instance has dropped the key. */
  changes?: Pick<KeyChanges, 'expect'>;
}

function limitsOf(row: Pick<ApiKeyRow, 'tier' | 'rateLimits'>): WindowLimits {
  if (row.tier === 'standard' || row.tier === 'premium') return tierLimits[row.tier];
  return {
    minute: row.rateLimits?.requests_per_minute ?? null,
    hour: row.rateLimits?.requests_per_hour ?? null,
    day: row.rateLimits?.requests_per_day ?? null,
  };
}

export function principalFromRow(row: ApiKeyRow): Principal {
  return {
    keyId: row.id,
    scopes: row.scopes as Scope[],
    tier: row.tier as Tier,
    limits: limitsOf(row),
    quota: {
      requestsPerDay: row.quota?.requests_per_day ?? null,
      tokensPerMonth: row.quota?.tokens_per_month ?? null,
    },
    collections: row.collections,
  };
}

const bootstrapPrincipal: Principal = {
  keyId: BOOTSTRAP_KEY_ID,
  scopes: ['admin'],
  tier: 'enterprise',
  limits: { minute: null, hour: null, day: null },
  quota: { requestsPerDay: null, tokensPerMonth: null },
  collections: null,
};

export function toRecord(row: ApiKeyRow): KeyRecord {
  const limits = limitsOf(row);
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    scopes: row.scopes as Scope[],
    tier: row.tier as Tier,
    rate_limits: {
      requests_per_minute: limits.minute,
      requests_per_hour: limits.hour,
      requests_per_day: limits.day,
    },
    collections: row.collections,
    quota: {
      requests_per_day: row.quota?.requests_per_day ?? null,
      tokens_per_month: row.quota?.tokens_per_month ?? null,
    },
    expires_at: row.expiresAt?.toISOString() ?? null,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}

const isoDay = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

const noCache = (clock: Clock) => createAuthCache({ ttlMs: 0, clock, usable: () => false });

export function createKeysService({
  repo,
  limiter,
  clock,
  adminKey,
  cache = noCache(clock),
  changes,
}: KeysServiceDeps) {
  /** Runs a write of one key, forgets the key here, and waits until the other instances have too. */
  const changing = async <T>(id: string, write: () => Promise<T>): Promise<T> => {
    const pending = changes?.expect(id);
    let result: T;
    try {
      result = await write();
    } catch (error) {
      pending?.cancel();
      throw error;
    } finally {
      cache.invalidate(id);
    }
    await pending?.acknowledged();
    return result;
  };

  const expiryFrom = (value: string | null | undefined): Date | null | undefined => {
    if (value === undefined || value === null) return value;
    const date = new Date(value);
    if (date.getTime() <= clock()) throw invalid('expires_at must be in the future', 'expires_at');
    return date;
  };

  const checkRateLimits = (tier: Tier, rateLimits: unknown) => {
    if (tier !== 'enterprise' && rateLimits !== undefined && rateLimits !== null) {
      throw invalid('rate_limits can only be set on enterprise keys; other tiers use fixed limits', 'rate_limits');
    }
  };

  const adminKeyHash = adminKey === undefined ? undefined : hashSecret(adminKey);

  const requireLive = async (manager: KeyManager, id: string): Promise<ApiKeyRow> => {
    const row = await repo.findLive(id, manager.collections);
    if (!row) throw notFound('API key not found');
    return row;
  };

  /** A key the manager creates, or a change it makes, stays within the manager's collections. */
  const checkCollections = (manager: KeyManager, collections: readonly string[] | null) => {
    if (coversCollections(manager, collections)) return;
    const outside = collections?.find((name) => !manager.collections?.includes(name));
    throw new AppError({
      code: 'insufficient_scope',
      message:
        outside === undefined
          ? 'This API key is restricted to collections: a key it creates or changes must be restricted to at least one of them'
          : `This API key may not use collection '${outside}'`,
      param: 'collections',
    });
  };

  return {
    /** Verifies a presented secret. Never throws for a bad key: the caller maps the outcome. */
    async authenticate(secret: string): Promise<AuthOutcome> {
      // One hash per request: the presented secret's, compared with the admin key's (hashed once).
      const secretHash = hashSecret(secret);
      if (adminKeyHash !== undefined && hashesEqual(secretHash, adminKeyHash)) {
        return { ok: true, principal: bootstrapPrincipal };
      }
      if (!isWellFormedKey(secret)) return { ok: false, reason: 'malformed' };
      const key = await cache.lookup(secretHash, async () => {
        const row = await repo.findByHash(secretHash);
        return row && { row, principal: principalFromRow(row) };
      });
      if (!key) return { ok: false, reason: 'unknown' };
      const { row } = key;
      if (row.revokedAt !== null) return { ok: false, reason: 'revoked' };
      if (row.expiresAt !== null && row.expiresAt.getTime() <= clock()) return { ok: false, reason: 'expired' };
      return { ok: true, principal: key.principal };
    },

    async create(manager: KeyManager, input: CreateKeyBody): Promise<KeyRecord & { key: string }> {
      checkCollections(manager, input.collections ?? null);
      checkRateLimits(input.tier, input.rate_limits);
      const secret = generateSecret();
      const row = await repo.insert({
        id: newId('key'),
        name: input.name,
        secretHash: hashSecret(secret),
        prefix: visiblePrefix(secret),
        scopes: input.scopes,
        tier: input.tier,
        rateLimits: input.rate_limits ?? null,
        collections: input.collections ?? null,
        quota: input.quota ?? null,
        expiresAt: expiryFrom(input.expires_at) ?? null,
      });
      return { ...toRecord(row), key: secret };
    },

    async list(manager: KeyManager): Promise<KeyRecord[]> {
      return (await repo.listLive(manager.collections)).map(toRecord);
    },

    async get(manager: KeyManager, id: string): Promise<KeyRecord> {
      return toRecord(await requireLive(manager, id));
    },

    async update(manager: KeyManager, id: string, input: UpdateKeyBody): Promise<KeyRecord> {
      const current = await requireLive(manager, id);
      if (input.collections !== undefined) checkCollections(manager, input.collections);
      const tier = input.tier ?? (current.tier as Tier);
      checkRateLimits(tier, input.rate_limits);
      const patch: KeyPatch = {};
      if (input.name !== undefined) patch.name = input.name;
      if (input.scopes !== undefined) patch.scopes = input.scopes;
      if (input.tier !== undefined) patch.tier = input.tier;
      // Custom limits belong to enterprise keys only; leaving the tier drops them.
      if (input.rate_limits !== undefined) patch.rateLimits = input.rate_limits;
      else if (tier !== 'enterprise') patch.rateLimits = null;
      if (input.collections !== undefined) patch.collections = input.collections;
      if (input.quota !== undefined) patch.quota = input.quota;
      const expiresAt = expiryFrom(input.expires_at);
      if (expiresAt !== undefined) patch.expiresAt = expiresAt;
      const row = await changing(id, () => repo.update(id, patch, manager.collections));
      if (!row) throw notFound('API key not found');
      return toRecord(row);
    },

    async revoke(manager: KeyManager, id: string): Promise<void> {
      const revoked = await changing(id, () => repo.revoke(id, manager.collections));
      if (!revoked) throw notFound('API key not found');
    },

    async rotate(manager: KeyManager, id: string): Promise<KeyRecord & { key: string }> {
      const secret = generateSecret();
      const row = await changing(id, () =>
        repo.replaceSecret(id, hashSecret(secret), visiblePrefix(secret), manager.collections),
      );
      if (!row) throw notFound('API key not found');
      return { ...toRecord(row), key: secret };
    },

    async usage(manager: KeyManager, id: string): Promise<KeyUsage> {
      const row = await requireLive(manager, id);
      const principal = principalFromRow(row);
      const now = clock();
      const outcome = await limiter.peek(keySubject(row.id), windowsFor(principal), now);
      const today = new Date(now);
      const monthStart = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 1);
      const nextMonth = Date.UTC(today.getUTCFullYear(), today.getUTCMonth() + 1, 1);
      const dayStart = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate());
      const firstDay = isoDay(Math.min(monthStart, now - 30 * 86_400_000));
      const daily = await repo.usageSince(row.id, firstDay);
      const monthTokens = daily
        .filter((d) => d.day >= isoDay(monthStart))
        .reduce((sum, d) => sum + d.promptTokens + d.completionTokens, 0);
      const quotaDay = outcome.windows.find((w) => w.name === 'quota_day');
      return {
        key_id: row.id,
        rate_limits: outcome.windows.flatMap((w) =>
          w.name === 'quota_day'
            ? []
            : [{ window: w.name, limit: w.limit, used: w.used, remaining: w.remaining, reset: w.resetAt }],
        ),
        quota: {
          requests_per_day: {
            limit: principal.quota.requestsPerDay,
            used: quotaDay?.used ?? 0,
            period_start: new Date(dayStart).toISOString(),
            period_end: new Date(dayStart + 86_400_000).toISOString(),
          },
          tokens_per_month: {
            limit: principal.quota.tokensPerMonth,
            used: monthTokens,
            period_start: new Date(monthStart).toISOString(),
            period_end: new Date(nextMonth).toISOString(),
          },
        },
        daily: daily.map((d) => ({
          day: d.day,
          model: d.model,
          requests: d.requests,
          prompt_tokens: d.promptTokens,
          completion_tokens: d.completionTokens,
          total_tokens: d.promptTokens + d.completionTokens,
        })),
      };
    },
  };
}

export type KeysService = ReturnType<typeof createKeysService>;
