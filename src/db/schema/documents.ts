import { bigint, index, integer, jsonb, pgTable, sql, text, timestamp, uniqueIndex } from '../orm.ts';
import { bytea, createdAt, updatedAt } from '../columns.ts';
import { collections } from './collections.ts';

export type DocumentStatus = 'pending' | 'processing' | 'processed' | 'failed' | 'cancelled';

/** What a processing document's worker is doing now. */
export type IngestionStage = 'parsing' | 'chunking' | 'embedding';

export const documents = pgTable(
  'documents',
  {
    id: text('id').primaryKey(),
    collectionId: text('collection_id')
      .notNull()
      .references(() => collections.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    description: text('description'),
    metadata: jsonb('metadata').$type<Record<string, unknown>>(),
    contentType: text('content_type').notNull(),
    format: text('format').notNull(),
    sizeBytes: bigint('size_bytes', { mode: 'number' }).notNull(),
    /** sha256 of the original bytes: a byte-identical re-upload to a collection is refused. */
    sha256: text('sha256').notNull(),
    /** The original, kept so a document can be reprocessed. */
    original: bytea('original').notNull(),
    status: text('status').$type<DocumentStatus>().notNull().default('pending'),
    error: text('error'),
    /** What the searchable version left out (its text cut at a parse limit); null when nothing was. */
    warning: text('warning'),
    chunkCount: integer('chunk_count').notNull().default(0),
    processedAt: timestamp('processed_at', { withTimezone: true, mode: 'date' }),
    /** The version whose chunks are searchable: 1 for the upload, one more for each committed replace. */
    version: integer('version').notNull().default(1),
    /** When the current version replaced the previous one; null for a document never replaced. */
    replacedAt: timestamp('replaced_at', { withTimezone: true, mode: 'date' }),
    /** Progress of the running job: its stage and chunks embedded of the total; null otherwise. */
    stage: text('stage').$type<IngestionStage>(),
    chunksEmbedded: integer('chunks_embedded'),
    chunksTotal: integer('chunks_total'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    uniqueIndex('documents_collection_sha_idx').on(t.collectionId, t.sha256),
    index('documents_collection_created_idx').on(t.collectionId, t.createdAt, t.id),
    index('documents_metadata_idx').using('gin', sql`${t.metadata} jsonb_path_ops`),
    // A collection's counts (collections.repository.ts) read this index alone instead of every
    // document row of every collection (a GET of one collection of 5,183 documents read 13 MB).
    index('documents_collection_processed_idx')
      .on(t.collectionId, t.chunkCount)
      .where(sql`${t.processedAt} is not null`),
  ],
);

export type DocumentRow = typeof documents.$inferSelect;
