import type { Logger } from 'pino';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Db } from '../db/client.ts';
import { createTokenQuota } from './quota.ts';
import { createBatchedUsageRecorder } from './usage.recorder.ts';
import { createUsageRepository } from './usage.repository.ts';

export interface UsageModuleDeps {
  db: Db;
  config: Pick<Config, 'usageFlushIntervalMs' | 'usageFlushMaxRows'>;
  logger: Logger;
  clock: Clock;
}

/**
 * Usage counters and the monthly token quota read from them. No routes of its own: a key's usage
 * is read through the keys routes. `service` is written in batches; `close` flushes the last one.
 */
export function createUsageModule(deps: UsageModuleDeps) {
  const repo = createUsageRepository(deps.db);
  const service = createBatchedUsageRecorder({
    repo,
    clock: deps.clock,
    logger: deps.logger,
    flushIntervalMs: deps.config.usageFlushIntervalMs,
    maxPendingRows: deps.config.usageFlushMaxRows,
  });
  const quota = createTokenQuota({ repo, recorder: service, clock: deps.clock, ttlMs: 5_000 });
  return { service, quota, close: () => service.close() };
}
