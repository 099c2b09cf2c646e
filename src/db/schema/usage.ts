import { bigint, date, integer, pgTable, primaryKey, text } from '../orm.ts';

/** Per key, per UTC day, per model counters. Written in batches off the request path. */
export const usageDaily = pgTable(
  'usage_daily',
  {
    keyId: text('key_id').notNull(),
    day: date('day', { mode: 'string' }).notNull(),
    model: text('model').notNull(),
    requests: integer('requests').notNull().default(0),
    promptTokens: bigint('prompt_tokens', { mode: 'number' }).notNull().default(0),
    completionTokens: bigint('completion_tokens', { mode: 'number' }).notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.keyId, t.day, t.model] })],
);
