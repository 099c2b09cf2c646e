import type { ApiKeyRow } from '../db/schema/keys.ts';
import type { Clock } from './keys.service.ts';
import type { Principal } from './principal.ts';

/** A key as authentication needs it: the row's lifecycle fields and the principal built from it. */
export interface CachedKey {
  row: ApiKeyRow;
  principal: Principal;
}

export interface AuthCacheOptions {
  /** How long an entry may serve without news of a change; 0 turns the cache off. */
  ttlMs: number;
  clock: Clock;
  /**
   * Whether every change to a key reaches this process at once: always on the embedded database
   * (this process is its only writer), and on a server only while the change listener is connected.
   */
  usable: () => boolean;
  maxEntries?: number;
}

export interface AuthCache {
  /** The key with this secret hash: from memory when fresh, else from `load`, remembered. */
  lookup(secretHash: string, load: () => Promise<CachedKey | undefined>): Promise<CachedKey | undefined>;
  /** A key changed (revoked, rotated, scopes, limits, expiry): its entry goes. */
  invalidate(keyId: string): void;
  /** Changes may have been missed (the listener reconnected): everything goes. */
  clear(): void;
  readonly size: number;
}

/**
 * Keys by secret hash in memory, so that an authenticated request costs no database round trip.
 * Revocation, rotation, expiry and scope changes still apply to the next request: expiry is
 * checked against the clock on every use, and every change removes the key's entry here (and, on
 * a server, in every other instance through the change notification). Unknown secrets are not
 * remembered: a key created elsewhere works at once, and the unauthenticated rate limit bounds
 * the lookups a guesser can cause.
 */
export function createAuthCache(options: AuthCacheOptions): AuthCache {
  const maxEntries = options.maxEntries ?? 10_000;
  const byHash = new Map<string, CachedKey & { readAt: number }>();
  // A lookup that started before a change must not store what it read: the change may already
  // have been announced, and the entry would then outlive it.
  let generation = 0;
  const inflight = new Map<string, Promise<CachedKey | undefined>>();

  const invalidate = (keyId: string) => {
    generation++;
    // A read in flight may predate the change: later requests must not join it.
    inflight.clear();
    for (const [hash, entry] of byHash) if (entry.row.id === keyId) byHash.delete(hash);
  };

  return {
    async lookup(secretHash, load) {
      const enabled = options.ttlMs > 0 && options.usable();
      if (!enabled) return load();
      const entry = byHash.get(secretHash);
      if (entry !== undefined && options.clock() - entry.readAt < options.ttlMs) return entry;
      // A burst of requests with one key not yet in memory (a thousand streams opened at once)
      // reads it once, not once per request queued on the connection pool.
      const pending = inflight.get(secretHash);
      if (pending !== undefined) return pending;
      const started = generation;
      const readAt = options.clock();
      const loading = load().finally(() => inflight.delete(secretHash));
      inflight.set(secretHash, loading);
      const loaded = await loading;
      if (loaded !== undefined && started === generation && options.usable()) {
        if (byHash.size >= maxEntries) {
          const oldest = byHash.keys().next().value;
          if (oldest !== undefined) byHash.delete(oldest);
        }
        byHash.set(secretHash, { ...loaded, readAt });
      }
      return loaded;
    },
    invalidate,
    clear() {
      generation++;
      inflight.clear();
      byHash.clear();
    },
    get size() {
      return byHash.size;
    },
  };
}
