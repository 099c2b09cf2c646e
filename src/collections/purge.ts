import type { Logger } from 'pino';
import { sql } from '../db/orm.ts';
import { queryRows, type Db } from '../db/client.ts';
import { runInBackground } from '../db/priority.ts';
import { inSlices, timed, type Slicing } from '../db/slicing.ts';
import { createDocumentsRepository } from '../documents/documents.repository.ts';
import { createIndexRepository } from '../retrieval/index.repository.ts';
import { indexName } from './collections.repository.ts';

/**
 * Removes deleted collections' rows (collections.repository.ts `markDeleted`) in short
 * transactions, so that deleting a large collection never holds the database: on the embedded
 * database one transaction deleting 12,115 chunks and their 678,227 postings held its only
 * session for 1.3 s, every request waiting behind it. In order: chunks (their postings go by
 * cascade), documents (their jobs and staging rows by cascade), the collection's term statistics,
 * then the collection's own row with whatever is left. Each slice is sized from the last one's time
 * per row to take about `sliceMs`, and runs as background work (searches and other requests
 * first). Every process with the database runs one: a deletion interrupted by a crash or a restart
 * is finished by the next purger to look (at start, then every `pollMs`); two purgers of one
 * collection only share the work.
 */
export const PURGE_SLICING: Slicing = { sliceMs: 20, firstRows: 64, maxRows: 5_000 };

export interface CollectionPurger {
  start(): void;
  /** A collection was deleted: look now instead of at the next poll. */
  wake(): void;
  /**
   * Purges every deleted collection, and finishes deleting large documents whose deletion was
   * interrupted, now, whether started or not (tests, tools); resolves to how many of either.
   */
  runOnce(): Promise<number>;
  /** Stops after the slice under way. */
  stop(): Promise<void>;
}

export interface CollectionPurgerDeps {
  db: Db;
  logger: Logger;
  slicing?: Slicing;
  pollMs?: number;
  /** Called after each slice with the table and the rows it deleted (observability, tests). */
  onSlice?: (table: string, rows: number) => void;
}

interface Doomed {
  id: string;
  name: string;
}

/** One slice of each kind: deletes up to `rows` rows (a literal: it shapes the plan) and counts them. */
const slices: { table: string; slice: (collectionId: string, rows: number) => ReturnType<typeof sql> }[] = [
  {
    table: 'chunks',
    slice: (id, rows) =>
      sql`with gone as (delete from chunks where id in
            (select id from chunks where collection_id = ${id} limit ${sql.raw(String(rows))}) returning 1)
          select count(*)::int as n from gone`,
  },
  {
    table: 'documents',
    slice: (id, rows) =>
      sql`with gone as (delete from documents where id in
            (select id from documents where collection_id = ${id} limit ${sql.raw(String(rows))}) returning 1)
          select count(*)::int as n from gone`,
  },
  {
    table: 'term_stats',
    slice: (id, rows) =>
      // `= any(array(…))`: looked up in the primary key; `in (…)` was planned as a scan of every
      // collection's statistics (~15 ms a slice, whatever its size).
      sql`with gone as (delete from term_stats where collection_id = ${id} and term = any(array(
            select term from term_stats where collection_id = ${id} limit ${sql.raw(String(rows))})) returning 1)
          select count(*)::int as n from gone`,
  },
];

export function createCollectionPurger(deps: CollectionPurgerDeps): CollectionPurger {
  const { db, logger } = deps;
  const slicing = deps.slicing ?? PURGE_SLICING;
  const pollMs = deps.pollMs ?? 60_000;
  const documents = createDocumentsRepository(db);
  const index = createIndexRepository(db);
  let running = false;
  let stopping = false;
  let wakeUp: (() => void) | undefined;
  let woken = false;
  let loop: Promise<void> | undefined;
  let pass: Promise<number> | undefined;

  /**
   * The collection's vector index, first (its graph would otherwise be cleaned of every deleted
   * chunk by vacuum): concurrently, so that no search waits, of this collection or any other.
   * A plain DROP INDEX locks the whole chunks table, and waits for its slowest reader meanwhile
   * (a search of another collection took 4.7 s behind a 6 s reader). Again at every pass: a drop
   * interrupted, or raced by another purger, leaves an index this one drops.
   */
  const dropIndex = async (doomed: Doomed) => {
    try {
      await runInBackground(() => db.execute(sql.raw(`drop index concurrently if exists ${indexName(doomed.id)}`)));
    } catch (error) {
      logger.warn({ err: error, collection_id: doomed.id }, "dropping a deleted collection's vector index failed");
    }
  };

  /** Every row of one deleted collection, then the collection. */
  const purge = async (doomed: Doomed) => {
    const started = performance.now();
    const removed: Record<string, number> = {};
    let transactions = 0;
    await dropIndex(doomed);
    for (const { table, slice } of slices) {
      removed[table] = await inSlices(slicing, async (rows) => {
        if (stopping) return { value: 0, ms: 0 };
        const done = await runInBackground(() =>
          db.transaction((tx) =>
            timed(async () => (await queryRows<{ n: number }>(tx, slice(doomed.id, rows)))[0]?.n ?? 0),
          ),
        );
        transactions++;
        deps.onSlice?.(table, done.value);
        logger.debug(
          { collection_id: doomed.id, table, rows: done.value, ms: Math.round(done.ms * 10) / 10 },
          'purge slice',
        );
        return done;
      });
      if (stopping) return false;
    }
    // Whatever a worker wrote meanwhile goes by cascade; the row was announced deleted when it was marked.
    await runInBackground(() =>
      db.execute(sql`delete from collections where id = ${doomed.id} and deleted_at is not null`),
    );
    logger.info(
      {
        collection_id: doomed.id,
        collection: doomed.name,
        chunks: removed.chunks,
        documents: removed.documents,
        transactions: transactions + 1,
        duration_ms: Math.round(performance.now() - started),
      },
      'deleted collection purged',
    );
    return true;
  };

  /**
   * Large documents whose deletion a stop or a crash interrupted (documents.repository.ts
   * `delete`), and replaced versions whose removal was (index.repository.ts `removeRetired`).
   */
  const finishDocuments = async () => {
    let finished = 0;
    while (!stopping) {
      const hidden = await runInBackground(() => documents.hiddenForRemoval(), 'polling');
      if (hidden === undefined) break;
      await documents.removeHidden(hidden.documentId, hidden.collectionId);
      logger.info({ document_id: hidden.documentId }, 'interrupted document deletion finished');
      finished++;
    }
    while (!stopping) {
      const [retired] = await runInBackground(
        () =>
          queryRows<{ document_id: string }>(
            db,
            sql`select r.document_id from chunk_retired r
                join collections c on c.id = r.collection_id and c.deleted_at is null limit 1`,
          ),
        'polling',
      );
      if (retired === undefined) break;
      await index.removeRetired(retired.document_id);
      logger.info(
        { document_id: retired.document_id },
        "interrupted removal of a document's replaced version finished",
      );
      finished++;
    }
    return finished;
  };

  const runOnce = () =>
    (pass ??= (async () => {
      let purged = 0;
      try {
        for (;;) {
          const [doomed] = await runInBackground(
            () =>
              queryRows<Doomed>(
                db,
                sql`select id, name from collections where deleted_at is not null order by deleted_at, id limit 1`,
              ),
            'polling',
          );
          if (doomed === undefined) break;
          if (!(await purge(doomed))) return purged;
          purged++;
        }
        return purged + (await finishDocuments());
      } finally {
        pass = undefined;
      }
    })());

  const run = async () => {
    while (running) {
      woken = false;
      try {
        await runOnce();
      } catch (error) {
        logger.error({ err: error }, 'purging deleted collections failed; retrying at the next poll');
      }
      if (!running || woken) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, pollMs);
        wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wakeUp = undefined;
    }
  };

  return {
    start() {
      if (running) return;
      running = true;
      loop = run();
    },
    wake() {
      woken = true;
      wakeUp?.();
    },
    runOnce,
    async stop() {
      running = false;
      stopping = true;
      wakeUp?.();
      await loop;
      await pass?.catch(() => undefined);
    },
  };
}
