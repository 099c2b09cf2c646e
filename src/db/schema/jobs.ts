import { bigint, index, integer, jsonb, pgTable, text, timestamp } from '../orm.ts';
import { bytea, createdAt, updatedAt } from '../columns.ts';
import { documents } from './documents.ts';

export type JobStatus = 'queued' | 'running' | 'done' | 'failed' | 'cancelled';

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
    /** The key that queued this job (upload or replace); null for jobs queued before it was kept. */
    keyId: text('key_id'),
    /**
     * A replace: the new version's content, which becomes the document's only when its chunks
     * commit (until then the previous version stays searchable). Null for the first version,
     * whose content is the document's own.
     */
    version: integer('version').notNull().default(1),
    name: text('name'),
    description: text('description'),
    metadata: jsonb('metadata').$type<Record<string, unknown>>(),
    contentType: text('content_type'),
    format: text('format'),
    sizeBytes: bigint('size_bytes', { mode: 'number' }),
    sha256: text('sha256'),
    original: bytea('original'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('ingestion_jobs_claim_idx').on(t.status, t.runAfter),
    index('ingestion_jobs_document_idx').on(t.documentId),
  ],
);

export type JobRow = typeof ingestionJobs.$inferSelect;
