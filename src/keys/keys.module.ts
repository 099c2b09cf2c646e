import type { Logger } from 'pino';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Database } from '../db/client.ts';
import type { RateLimitStore } from '../ratelimit/ratelimit.ts';
import { createAuthCache } from './auth-cache.ts';
import { startKeyChanges, type KeyChanges } from './key-changes.ts';
import { createKeysRepository, KEY_CHANGES_CHANNEL } from './keys.repository.ts';
import { keysRoutes } from './keys.routes.ts';
import { createKeysService } from './keys.service.ts';

export interface KeysModuleDeps {
  database: Database;
  limiter: RateLimitStore;
  config: Pick<Config, 'adminKey' | 'authCacheTtlMs' | 'databaseUrl'>;
  logger: Logger;
  clock: Clock;
}

/**
 * API keys: the service authentication asks, its routes, and the cache of keys in memory. The
 * embedded database has one writer, this process, which drops a changed key itself. On a server,
 * other instances write too: their changes arrive through LISTEN, and while that connection is
 * down the cache is bypassed (every request reads its key).
 */
export async function createKeysModule(deps: KeysModuleDeps) {
  const { database, config, clock } = deps;
  let keyChanges: KeyChanges | undefined;
  const closing: (() => Promise<void>)[] = [];
  const cache = createAuthCache({
    ttlMs: config.authCacheTtlMs,
    clock,
    usable: () => database.kind === 'pglite' || keyChanges?.live === true,
  });
  if (database.kind === 'pglite' && config.authCacheTtlMs > 0) {
    // One process owns the data directory, but several apps may share one embedded database in
    // a process (tests, embedders): the change announced in the transaction reaches each of them
    // in process before the writer's call returns.
    const subscription = await database.listen(
      KEY_CHANGES_CHANNEL,
      (keyId) => cache.invalidate(keyId),
      () => cache.clear(),
    );
    closing.push(() => subscription.close());
  }
  if (database.kind === 'postgres' && config.databaseUrl !== undefined && config.authCacheTtlMs > 0) {
    const changes = await startKeyChanges({ url: config.databaseUrl, cache, logger: deps.logger });
    keyChanges = changes;
    closing.push(() => changes.close());
  }
  const service = createKeysService({
    repo: createKeysRepository(database.db),
    limiter: deps.limiter,
    clock,
    adminKey: config.adminKey,
    cache,
    ...(keyChanges ? { changes: keyChanges } : {}),
  });
  return {
    routes: keysRoutes(service),
    service,
    /** Stops following key changes. */
    close: async () => {
      for (const close of closing) await close();
    },
  };
}
