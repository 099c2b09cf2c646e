import { bigint, index, integer, pgTable, text } from '../orm.ts';
import { anyVector } from '../columns.ts';
import { collections } from './collections.ts';
import { documents } from './documents.ts';

export const chunks = pgTable(
  'chunks',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    documentId: text('document_id')
      .notNull()
      .references(() => documents.id, { onDelete: 'cascade' }),
    /** Denormalised from the document so searches filter on it without a join. */
    collectionId: text('collection_id')
      .notNull()
      .references(() => collections.id, { onDelete: 'cascade' }),
    position: integer('position').notNull(),
    startChar: integer('start_char').notNull(),
    endChar: integer('end_char').notNull(),
    tokenCount: integer('token_count').notNull(),
    /** Length in keyword-analyzer terms, for BM25's length normalisation. */
    termCount: integer('term_count').notNull().default(0),
    content: text('content').notNull(),
    /** The model that embedded this chunk, so vector spaces are never mixed. */
    model: text('model').notNull(),
    embedding: anyVector('embedding').notNull(),
  },
  (t) => [index('chunks_document_idx').on(t.documentId, t.position), index('chunks_collection_idx').on(t.collectionId)],
);

/**
 * A document whose new chunks are being written in several transactions (a large document, so
 * that no one transaction holds the database for long): its chunks with ids from `firstChunkId`
 * on are that unfinished version, which searches leave out until the last transaction publishes
 * it (and deletes this row). Chunks below stay what searches see meanwhile (a replace's previous
 * version).
 */
export const chunkStaging = pgTable(
  'chunk_staging',
  {
    documentId: text('document_id')
      .primaryKey()
      .references(() => documents.id, { onDelete: 'cascade' }),
    collectionId: text('collection_id')
      .notNull()
      .references(() => collections.id, { onDelete: 'cascade' }),
    firstChunkId: bigint('first_chunk_id', { mode: 'number' }).notNull(),
  },
  (t) => [index('chunk_staging_collection_idx').on(t.collectionId)],
);

/**
 * A document whose replaced version is being removed in several transactions (more than
 * RETIRE_ABOVE chunks, so that no one transaction holds the database for long): its chunks with
 * ids below `belowChunkId` are that version, which searches leave out; each slice removes some,
 * and the last one this row.
 */
export const chunkRetired = pgTable(
  'chunk_retired',
  {
    documentId: text('document_id')
      .primaryKey()
      .references(() => documents.id, { onDelete: 'cascade' }),
    collectionId: text('collection_id')
      .notNull()
      .references(() => collections.id, { onDelete: 'cascade' }),
    belowChunkId: bigint('below_chunk_id', { mode: 'number' }).notNull(),
  },
  (t) => [index('chunk_retired_collection_idx').on(t.collectionId)],
);
