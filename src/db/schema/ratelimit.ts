import { bigint, index, integer, pgTable, text } from '../orm.ts';

/**
 * The in-process rate-limit store's counters of an hour or more (the hour, day and daily-quota
 * windows of each key), kept so that a restart does not give every key its windows afresh: a
 * `requests_per_day` quota holds across restarts. Written in batches off the request path
 * (`src/ratelimit/durable.ts`); unused with Redis, which keeps them itself.
 */
export const rateLimitCounters = pgTable(
  'rate_limit_counters',
  {
    /** The store's own key: `rl:{key:<id>}:<window>:<window start, Unix seconds>`. */
    counterKey: text('counter_key').primaryKey(),
    count: integer('count').notNull(),
    /** When the window ends (ms since the epoch); the row is useless from then on. */
    expiresAtMs: bigint('expires_at_ms', { mode: 'number' }).notNull(),
  },
  (t) => [index('rate_limit_counters_expires_idx').on(t.expiresAtMs)],
);
