import { bigint, index, integer, pgTable, primaryKey, text } from '../orm.ts';
import { chunks } from './chunks.ts';
import { collections } from './collections.ts';

/**
 * The BM25 inverted index: one posting per (term, chunk) with the term's frequency and the
 * chunk's length, so a query reads only the posting lists of its own terms.
 */
export const chunkTerms = pgTable(
  'chunk_terms',
  {
    /**
     * The chunk's collection, denormalised for the index's order; no foreign key of its own: the
     * postings go with their chunk, and a cascade from the collection's row would walk the
     * collection's whole range of the primary key, dead entries included, when the purger
     * (collections/purge.ts) deletes it last (~170 ms of the embedded database at 650,000 postings).
     */
    collectionId: text('collection_id').notNull(),
    term: text('term').notNull(),
    chunkId: bigint('chunk_id', { mode: 'number' })
      .notNull()
      .references(() => chunks.id, { onDelete: 'cascade' }),
    tf: integer('tf').notNull(),
    length: integer('length').notNull(),
  },
  (t) => [primaryKey({ columns: [t.collectionId, t.term, t.chunkId] }), index('chunk_terms_chunk_idx').on(t.chunkId)],
);

/** Per-collection corpus statistics for BM25, kept in step with chunks in the same transactions. */
export const collectionStats = pgTable('collection_stats', {
  collectionId: text('collection_id')
    .primaryKey()
    .references(() => collections.id, { onDelete: 'cascade' }),
  chunkCount: bigint('chunk_count', { mode: 'number' }).notNull().default(0),
  totalTerms: bigint('total_terms', { mode: 'number' }).notNull().default(0),
});

/**
 * Document frequency of each term in a collection (chunks containing it), kept in step with the
 * postings in the same transactions, so a query reads one row per term instead of counting a
 * posting list.
 */
export const termStats = pgTable(
  'term_stats',
  {
    collectionId: text('collection_id')
      .notNull()
      .references(() => collections.id, { onDelete: 'cascade' }),
    term: text('term').notNull(),
    df: integer('df').notNull(),
  },
  (t) => [primaryKey({ columns: [t.collectionId, t.term] })],
);
