import { customType, timestamp } from './orm.ts';

/** Timestamps are stored with time zone and always handled as UTC instants. */
export const createdAt = () => timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow();

export const updatedAt = () => timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow();

/**
 * A pgvector column without a fixed dimension, so collections embedded by different models share
 * one table. Each collection's HNSW index casts to its own dimension (see collections.repository).
 */
export const anyVector = customType<{ data: number[]; driverData: string }>({
  dataType: () => 'vector',
  toDriver: (value) => `[${value.join(',')}]`,
  fromDriver: (value) => JSON.parse(value) as number[],
});

/** Raw bytes (an upload's original). */
export const bytea = customType<{ data: Uint8Array; driverData: Uint8Array }>({ dataType: () => 'bytea' });
