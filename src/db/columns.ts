import { timestamp } from 'drizzle-orm/pg-core';

/** Timestamps are stored with time zone and always handled as UTC instants. */
export const createdAt = () => timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow();

export const updatedAt = () => timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow();
