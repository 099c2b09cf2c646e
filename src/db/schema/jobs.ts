import { index, integer, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { createdAt, updatedAt } from '../columns.ts';
import { documents } from './documents.ts';

export type JobStatus = 'queued' | 'running' | 'done' | 'failed';

/**
 * The durable ingestion queue. Workers claim rows with FOR UPDATE SKIP LOCKED and hold them by a
 * lease they keep extending; a row whose lease expired belongs to a worker that died.
 */
export const ingestionJobs = pgTable(
  'ingestion_jobs',
  {
    id: text('id').primaryKey(),
    documentId: text('document_id')
      .notNull()
      .references(() => documents.id, { onDelete: 'cascade' }),
    status: text('status').$type<JobStatus>().notNull().default('queued'),
    attempts: integer('attempts').notNull().default(0),
    maxAttempts: integer('max_attempts').notNull().default(3),
    runAfter: timestamp('run_after', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    leaseOwner: text('lease_owner'),
    leaseExpiresAt: timestamp('lease_expires_at', { withTimezone: true, mode: 'date' }),
    lastError: text('last_error'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('ingestion_jobs_claim_idx').on(t.status, t.runAfter),
    index('ingestion_jobs_document_idx').on(t.documentId),
  ],
);

export type JobRow = typeof ingestionJobs.$inferSelect;
