import type { SQL } from 'drizzle-orm';
import { sql } from '../db/orm.ts';
import { queryRows, type Db } from '../db/client.ts';
import { retryOnDeadlock } from '../db/errors.ts';
import { runInBackground } from '../db/priority.ts';
import { chunks as chunksTable } from '../db/schema/chunks.ts';
import { inSlices, timed, type Slicing } from '../db/slicing.ts';

/** A chunk ready for the index: its text and place in the document, its vector and its BM25 terms. */
export interface IndexedChunk {
  position: number;
  startChar: number;
  endChar: number;
  tokenCount: number;
  content: string;
  embedding: Float32Array;
  /** Keyword-analyzer term frequencies and length, for the BM25 index. */
  terms: Map<string, number>;
  termCount: number;
}

const INSERT_BATCH = 200;

/** A replaced version of more chunks than this is removed in slices after the replace commits. */
export const RETIRE_ABOVE = 128;
export const RETIRE_SLICING: Slicing = { sliceMs: 20, firstRows: 16, maxRows: 2_000 };

/**
 * The search index — chunks with their vectors, the BM25 postings, and the per-term and
 * per-collection statistics — written only here, so the four stay in step. Every method runs in
 * the transaction it is given (or on its own), so a caller can commit a document's state change
 * together with its index.
 *
 * Every writer of one collection's statistics locks its collection_stats row first, so they queue
 * on it and cannot deadlock on term_stats rows taken in different orders.
 */
export function createIndexRepository(db: Db, options: { retireAbove?: number } = {}) {
  const retireAbove = options.retireAbove ?? RETIRE_ABOVE;
  /** In the caller's transaction, or in one of its own: the statements of a change never commit apart. */
  const within = <T>(tx: Db | undefined, work: (tx: Db) => Promise<T>): Promise<T> =>
    tx === undefined ? db.transaction(work) : work(tx);

  /**
   * Deletes the statistics rows of terms no chunk of the collection holds any more (`df` down to
   * 0), given the rows a removal just updated: left in place, they grew the table with every
   * distinct term a collection ever saw (order numbers, ids, names in documents since deleted).
   */
  /** Deletes the rows of `terms` (those a removal took to df 0), in the remover's transaction. */
  const dropEmptiedTerms = async (collectionId: string, emptied: { term: string }[], tx: Db) => {
    const gone = emptied.map((row) => row.term);
    if (gone.length === 0) return;
    await tx.execute(sql`
      delete from term_stats where collection_id = ${collectionId} and term = any(${sql.param(gone)}::text[]) and df <= 0`);
  };

  /**
   * Deletes a document's chunks (postings go by cascade) and takes them out of the statistics: all
   * of them, or those with ids from `from` on (a version being written), or below `below` (the
   * version it replaces).
   */
  const removeChunks = async (
    documentId: string,
    collectionId: string,
    tx: Db,
    range: { from?: number; below?: number } = {},
  ): Promise<void> => {
    const ofDocument = sql`document_id = ${documentId}
      ${range.from === undefined ? sql`` : sql`and id >= ${range.from}`}
      ${range.below === undefined ? sql`` : sql`and id < ${range.below}`}`;
    await tx.execute(sql`
      update collection_stats set
        chunk_count = chunk_count - (select count(*) from chunks where ${ofDocument}),
        total_terms = total_terms - (select coalesce(sum(term_count), 0) from chunks where ${ofDocument})
      where collection_id = ${collectionId}`);
    // Only the terms left without a chunk come back, not every term updated.
    const emptied = await queryRows<{ term: string }>(
      tx,
      sql`with updated as (
            update term_stats s set df = s.df - g.n
            from (select term, count(*)::int as n from chunk_terms
                  where chunk_id in (select id from chunks where ${ofDocument}) group by term) g
            where s.collection_id = ${collectionId} and s.term = g.term
            returning s.term, s.df)
          select term from updated where df <= 0`,
    );
    await dropEmptiedTerms(collectionId, emptied, tx);
    await tx.execute(sql`delete from chunks where ${ofDocument}`);
  };

  /**
   * Up to `rows` of a document's chunks (all of them, or those below `below`), first positions
   * first (read through the document's index: `order by id` was planned as a walk of the primary
   * key from the collection's first chunk), with their postings and statistics, by the chunks' ids: `removeChunks`' whole-document
   * statements are planned as scans of the collection's chunks and term statistics, ~18 ms a
   * slice whatever its size. How many went.
   */
  const removeSlice = async (
    documentId: string,
    collectionId: string,
    rows: number,
    tx: Db,
    below?: number,
  ): Promise<number> => {
    const doomed = await queryRows<{ id: string | number; term_count: number }>(
      tx,
      sql`select id, term_count from chunks
          where document_id = ${documentId} ${below === undefined ? sql`` : sql`and id < ${below}`}
          order by position limit ${sql.raw(String(Math.max(1, Math.trunc(rows))))}`,
    );
    if (doomed.length === 0) return 0;
    const ids = sql.param(doomed.map((c) => Number(c.id)));
    const terms = doomed.reduce((sum, c) => sum + Number(c.term_count), 0);
    // The statistics row first (the lock order above).
    await tx.execute(sql`
      update collection_stats set chunk_count = chunk_count - ${doomed.length}, total_terms = total_terms - ${terms}
      where collection_id = ${collectionId}`);
    // An upsert, so that each term is looked up in the primary key (every term is there).
    const emptied = await queryRows<{ term: string }>(
      tx,
      sql`with updated as (
            insert into term_stats (collection_id, term, df)
            select ${collectionId}, term, -count(*)::int from chunk_terms where chunk_id = any(${ids}::bigint[]) group by term
            on conflict (collection_id, term) do update set df = term_stats.df + excluded.df
            returning term, df)
          select term from updated where df <= 0`,
    );
    await dropEmptiedTerms(collectionId, emptied, tx);
    await tx.execute(sql`delete from chunks where id = any(${ids}::bigint[])`);
    return doomed.length;
  };

  /**
   * The document's chunks below `below` (a version just replaced): removed now when there are at
   * most `retireAbove`, else hidden from searches at once (`chunk_retired`) and left for
   * `removeRetired`, a slice per transaction: one transaction removing 3,106 chunks held the
   * embedded database ~0.5 s. Whether they were left (retired).
   */
  const removeOrRetire = async (documentId: string, collectionId: string, below: number, tx: Db): Promise<boolean> => {
    const [old] = await queryRows<{ n: number }>(
      tx,
      sql`select count(*)::int as n from chunks where document_id = ${documentId} and id < ${below}`,
    );
    if ((old?.n ?? 0) <= retireAbove) {
      await removeChunks(documentId, collectionId, tx, { below });
      // An earlier version still being removed went with it.
      await tx.execute(sql`delete from chunk_retired where document_id = ${documentId}`);
      return false;
    }
    await tx.execute(sql`
      insert into chunk_retired (document_id, collection_id, below_chunk_id) values (${documentId}, ${collectionId}, ${below})
      on conflict (document_id) do update set below_chunk_id = greatest(chunk_retired.below_chunk_id, excluded.below_chunk_id)`);
    return true;
  };

  /**
   * Removes up to `rows` chunks of a document's retired version (`removeOrRetire`) with their postings and statistics; how many. When none are left the record goes too,
   * and it is 0.
   */
  const removeRetiredSlice = async (documentId: string, rows: number, tx: Db): Promise<number> => {
    const [retired] = await queryRows<{ below_chunk_id: string | number; collection_id: string }>(
      tx,
      sql`select below_chunk_id, collection_id from chunk_retired where document_id = ${documentId} for update`,
    );
    if (retired === undefined) return 0;
    const removed = await removeSlice(documentId, retired.collection_id, rows, tx, Number(retired.below_chunk_id));
    if (removed === 0) await tx.execute(sql`delete from chunk_retired where document_id = ${documentId}`);
    return removed;
  };

  /** Removes the unfinished version of a document being written in slices, if there is one. */
  const dropStaged = async (documentId: string, tx: Db): Promise<void> => {
    const [staged] = await queryRows<{ first_chunk_id: string | number; collection_id: string }>(
      tx,
      sql`delete from chunk_staging where document_id = ${documentId} returning first_chunk_id, collection_id`,
    );
    if (staged) await removeChunks(documentId, staged.collection_id, tx, { from: Number(staged.first_chunk_id) });
  };

  /** Adds a document's chunks, postings and statistics. */
  const addDocument = async (
    documentId: string,
    collectionId: string,
    model: string,
    chunks: readonly IndexedChunk[],
    tx: Db,
  ): Promise<void> => {
    // The statistics row first: see the lock order above.
    let terms = 0;
    for (const c of chunks) terms += c.termCount;
    await tx.execute(sql`
      insert into collection_stats (collection_id, chunk_count, total_terms)
      values (${collectionId}, ${chunks.length}, ${terms})
      on conflict (collection_id) do update set chunk_count = collection_stats.chunk_count + excluded.chunk_count,
        total_terms = collection_stats.total_terms + excluded.total_terms`);
    for (let i = 0; i < chunks.length; i += INSERT_BATCH) {
      const batch = chunks.slice(i, i + INSERT_BATCH);
      const ids = await tx
        .insert(chunksTable)
        .values(
          batch.map((c) => ({
            documentId,
            collectionId,
            position: c.position,
            startChar: c.startChar,
            endChar: c.endChar,
            tokenCount: c.tokenCount,
            termCount: c.termCount,
            content: c.content,
            model,
            embedding: Array.from(c.embedding),
          })),
        )
        .returning({ id: chunksTable.id, position: chunksTable.position });
      const idOf = new Map(ids.map((r) => [r.position, r.id]));
      const postings = batch.flatMap((c) =>
        [...c.terms].map(([term, tf]) => ({ term, chunkId: idOf.get(c.position) as number, tf, length: c.termCount })),
      );
      if (postings.length > 0) {
        await tx.execute(sql`
          insert into chunk_terms (collection_id, term, chunk_id, tf, length)
          select ${collectionId}, * from unnest(
            ${sql.param(postings.map((p) => p.term))}::text[], ${sql.param(postings.map((p) => p.chunkId))}::bigint[],
            ${sql.param(postings.map((p) => p.tf))}::int[], ${sql.param(postings.map((p) => p.length))}::int[])`);
      }
    }
    // Document frequencies: the number of this document's chunks holding each term.
    const df = new Map<string, number>();
    for (const c of chunks) for (const term of c.terms.keys()) df.set(term, (df.get(term) ?? 0) + 1);
    if (df.size > 0) {
      const sorted = [...df.keys()].sort();
      await tx.execute(sql`
        insert into term_stats (collection_id, term, df)
        select ${collectionId}, * from unnest(${sql.param(sorted)}::text[], ${sql.param(sorted.map((t) => df.get(t) as number))}::int[])
        on conflict (collection_id, term) do update set df = term_stats.df + excluded.df`);
    }
  };

  return {
    /** A new collection's (empty) statistics row. */
    async openCollection(collectionId: string, tx?: Db): Promise<void> {
      await (tx ?? db).execute(sql`insert into collection_stats (collection_id) values (${collectionId})`);
    },

    /** Takes a document out of the index (its chunks, postings and their statistics). */
    async removeDocument(documentId: string, collectionId: string, tx?: Db): Promise<void> {
      await within(tx, async (t) => {
        await t.execute(sql`delete from chunk_staging where document_id = ${documentId}`);
        await removeChunks(documentId, collectionId, t);
      });
    },

    /**
     * Hides every chunk of the document from searches at once, as a version being written hides
     * its own (a staging record from chunk 0: every id is above it), for `removeHiddenSlice` to
     * remove a slice at a time. A version being written is hidden with the rest.
     */
    async hideDocument(documentId: string, collectionId: string, tx: Db): Promise<void> {
      await tx.execute(sql`
        insert into chunk_staging (document_id, collection_id, first_chunk_id) values (${documentId}, ${collectionId}, 0)
        on conflict (document_id) do update set first_chunk_id = 0`);
    },

    /**
     * Removes up to `rows` chunks of a hidden document (first positions first) with their postings and
     * statistics; how many. 0 when none are left, or when it is no longer hidden whole (a replace
     * began writing a new version meanwhile).
     */
    async removeHiddenSlice(documentId: string, collectionId: string, rows: number, tx: Db): Promise<number> {
      const [staged] = await queryRows<{ first_chunk_id: string | number }>(
        tx,
        sql`select first_chunk_id from chunk_staging where document_id = ${documentId} for update`,
      );
      if (staged === undefined || Number(staged.first_chunk_id) !== 0) return 0;
      return removeSlice(documentId, collectionId, rows, tx);
    },

    removeRetiredSlice,

    /** Removes a document's retired version a slice per transaction (background work), then its record. */
    async removeRetired(documentId: string, slicing: Slicing = RETIRE_SLICING): Promise<number> {
      return inSlices(slicing, (rows) =>
        runInBackground(() =>
          retryOnDeadlock(() => db.transaction((tx) => timed(() => removeRetiredSlice(documentId, rows, tx)))),
        ),
      );
    },

    /**
     * The document's chunks become exactly `chunks`: the old set goes and the new one comes in the
     * caller's transaction, so a search sees one set or the other, never both and never neither.
     * `has_chunks: false` (read under the document's lock) skips removing a set that is not there,
     * `staged: false` the record of an unfinished version written in slices by an earlier attempt
     * (whose chunks go with the old set). A large old set is hidden instead (`retired`), for
     * `removeRetired`.
     */
    async replaceDocument(
      documentId: string,
      collectionId: string,
      model: string,
      chunks: readonly IndexedChunk[],
      tx?: Db,
      present: { has_chunks: boolean; staged: boolean } = { has_chunks: true, staged: true },
    ): Promise<{ retired: boolean }> {
      return within(tx, async (t) => {
        if (present.staged) await t.execute(sql`delete from chunk_staging where document_id = ${documentId}`);
        let retired = false;
        if (present.has_chunks) {
          // Every chunk there now is below the next id; every new one at or above it.
          const [next] = await queryRows<{ id: string | number }>(
            t,
            sql`select nextval(pg_get_serial_sequence('chunks', 'id')) as id`,
          );
          retired = await removeOrRetire(documentId, collectionId, Number(next?.id), t);
        }
        await addDocument(documentId, collectionId, model, chunks, t);
        return { retired };
      });
    },

    /**
     * A new version of a document written in several transactions (`addStaged`, then
     * `publishStaged`), so that none of them holds the database for long: its chunks are in the
     * index from the first slice on, but searches leave them out (`hiddenChunkIds`) until it is
     * published, and see the previous version meanwhile. An unfinished version of an earlier
     * attempt is removed first.
     */
    async beginStaged(documentId: string, collectionId: string, tx: Db): Promise<void> {
      await dropStaged(documentId, tx);
      // Chunk ids come from one sequence: every chunk of this version is at or above this one,
      // every chunk of the version it replaces below.
      await tx.execute(sql`
        insert into chunk_staging (document_id, collection_id, first_chunk_id)
        values (${documentId}, ${collectionId}, nextval(pg_get_serial_sequence('chunks', 'id')))`);
    },

    /** Adds a slice of the version being written; false when it was dropped meanwhile. */
    async addStaged(
      documentId: string,
      collectionId: string,
      model: string,
      chunks: readonly IndexedChunk[],
      tx: Db,
    ): Promise<boolean> {
      const staged = await queryRows(tx, sql`select 1 from chunk_staging where document_id = ${documentId} for update`);
      if (staged.length === 0) return false;
      await addDocument(documentId, collectionId, model, chunks, tx);
      return true;
    },

    /**
     * The version being written becomes the document's, and the previous one goes, in the
     * caller's transaction (`retired`: hidden, to be removed in slices by `removeRetired`); false
     * when there is no such version (dropped meanwhile).
     */
    async publishStaged(documentId: string, collectionId: string, tx: Db): Promise<false | 'published' | 'retired'> {
      const [staged] = await queryRows<{ first_chunk_id: string | number }>(
        tx,
        sql`delete from chunk_staging where document_id = ${documentId} returning first_chunk_id`,
      );
      if (!staged) return false;
      return (await removeOrRetire(documentId, collectionId, Number(staged.first_chunk_id), tx))
        ? 'retired'
        : 'published';
    },

    /** Removes the unfinished version of a document, if any (its job failed or will be retried). */
    async dropStaged(documentId: string, tx?: Db): Promise<void> {
      await within(tx, (t) => dropStaged(documentId, t));
    },
  };
}

/**
 * The ids of a collection's chunks that searches must leave out: versions still being written in
 * slices (`beginStaged`), documents being deleted in slices (`hideDocument`), and replaced
 * versions still being removed in slices (`chunk_retired`). Uncorrelated, so PostgreSQL hashes it
 * once per statement; with nothing being written or removed it reads two empty indexes. Lateral, so each staged document's chunks are read
 * through the document's index (a plain join was planned as a scan of every chunk).
 */
export const hiddenChunkIds = (collectionId: SQL) =>
  sql`select c.id from chunk_staging s
      cross join lateral (select id from chunks where document_id = s.document_id and id >= s.first_chunk_id) c
      where s.collection_id = ${collectionId}
      union all
      select c.id from chunk_retired r
      cross join lateral (select id from chunks where document_id = r.document_id and id < r.below_chunk_id) c
      where r.collection_id = ${collectionId}`;

export type IndexRepository = ReturnType<typeof createIndexRepository>;
