import { sql } from '../db/orm.ts';
import { queryRows, type Db } from '../db/client.ts';
import { timed } from '../db/slicing.ts';
import type { IngestionStage } from '../db/schema/documents.ts';
import { createIndexRepository, type IndexedChunk } from '../retrieval/index.repository.ts';

/** Why a job ended before its worker finished it, when not by losing its lease. */
export type JobEnd = 'cancelled' | 'deleted';

export interface ClaimedJob {
  jobId: string;
  documentId: string;
  attempts: number;
  maxAttempts: number;
}

/** What a job ingests: the document's own content, or for a replace the new version's. */
export interface JobDocument {
  id: string;
  collectionId: string;
  format: string;
  original: Uint8Array;
  metadata: Record<string, unknown> | null;
  embeddingProvider: string;
  embeddingModel: string;
  /** The collection's vector length, fixed at its creation. */
  dimensions: number;
  /** The key that uploaded (or replaced) this content: upstream embedding tokens count against it. */
  keyId: string | null;
}

export type EmbeddedChunk = IndexedChunk;

/** The job is still this worker's to finish (not lost, cancelled or superseded). */
const holds = (job: ClaimedJob, workerId: string) =>
  sql`exists (select 1 from ingestion_jobs where id = ${job.jobId} and lease_owner = ${workerId} and status = 'running')`;

/** A job not held any more, by its row: gone with its document, cancelled, or claimed again. */
const endedBy = (status: string | null): JobEnd | 'lost' =>
  status === null ? 'deleted' : status === 'cancelled' ? 'cancelled' : 'lost';

/** A document no longer being worked on shows no progress. */
const noProgress = sql`stage = null, chunks_embedded = null, chunks_total = null`;

/** Locks the job's row, if this worker still holds it. */
/**
 * Every transaction that writes a document's index takes its collection's row first (FOR KEY
 * SHARE), before the job's row. A collection's DELETE locks that row FOR UPDATE and then the
 * collection's running jobs; the index writes used to lock the job first and reach the collection
 * row later (the foreign-key checks of chunks and collection_stats): on a PostgreSQL server each
 * waited for the other, and a DELETE racing uploads lost all its deadlock retries (a probe: 8 of
 * 10 answered 500 after 4-10 s, the collection not deleted). In this order the writer waits for a
 * DELETE under way and then finds its job cancelled, or the DELETE waits for the writer's commit.
 */
const lockCollection = async (tx: Db, collectionId: string): Promise<void> => {
  await tx.execute(sql`select id from collections where id = ${collectionId} for key share`);
};

/** The collection of the job's document, locked as `lockCollection` says; undefined if it is gone. */
const lockCollectionOf = async (tx: Db, job: ClaimedJob): Promise<string | undefined> =>
  (
    await queryRows<{ id: string }>(
      tx,
      sql`select c.id from collections c join documents d on d.collection_id = c.id
          where d.id = ${job.documentId} for key share of c`,
    )
  )[0]?.id;

const lockJob = async (tx: Db, job: ClaimedJob, workerId: string): Promise<boolean> =>
  (
    await queryRows(
      tx,
      sql`select id from ingestion_jobs where id = ${job.jobId} and lease_owner = ${workerId} and status = 'running' for update`,
    )
  ).length > 0;

/** The document takes the job's content and the job ends (both rows locked by the caller). */
async function finish(tx: Db, job: ClaimedJob, chunkCount: number, warning: string | null): Promise<void> {
  // One statement: the document reads the job's row as it was before it.
  await tx.execute(
    sql`with done as (
          update ingestion_jobs set status = 'done', lease_owner = null, lease_expires_at = null,
                 last_error = null, original = null, updated_at = now()
          where id = ${job.jobId})
        update documents d set status = 'processed', error = null, warning = ${warning}, chunk_count = ${chunkCount},
          processed_at = now(), updated_at = now(), ${noProgress}, version = j.version,
          -- A first upload, or new content for a document that never had a version (a cancelled or
          -- failed first upload sent again): nothing was replaced.
          replaced_at = case when j.original is null or d.processed_at is null then d.replaced_at else now() end,
          name = coalesce(j.name, d.name), description = coalesce(j.description, d.description),
          metadata = coalesce(j.metadata, d.metadata), content_type = coalesce(j.content_type, d.content_type),
          format = coalesce(j.format, d.format), size_bytes = coalesce(j.size_bytes, d.size_bytes),
          sha256 = coalesce(j.sha256, d.sha256), original = coalesce(j.original, d.original)
        from ingestion_jobs j where j.id = ${job.jobId} and d.id = ${job.documentId}`,
  );
}

/**
 * How a document's chunks are committed. Up to `singleMax` in one transaction; a larger document
 * in slices, the first of `firstSlice` chunks, each next one sized from the last one's time per
 * chunk to take about `sliceMs` (at most `maxSlice` chunks): on the embedded database ~10 ms per
 * chunk (its vector index insert, postings and statistics), so 2–5 chunks a slice; on a PostgreSQL
 * server a few times more.
 */
export interface CommitSlicing {
  singleMax: number;
  firstSlice: number;
  sliceMs: number;
  maxSlice: number;
}

export const COMMIT_SLICING: CommitSlicing = { singleMax: 8, firstSlice: 4, sliceMs: 40, maxSlice: 64 };

/**
 * The ingestion queue. Every state change of a job is guarded by its lease owner, so a worker
 * that lost its lease (it stalled, another took over) can never write a second set of chunks.
 */
export function createJobsRepository(db: Db, { slicing = COMMIT_SLICING }: { slicing?: CommitSlicing } = {}) {
  const index = createIndexRepository(db);
  return {
    async claim(workerId: string, leaseMs: number): Promise<ClaimedJob | undefined> {
      const [job] = await queryRows<{ id: string; document_id: string; attempts: number; max_attempts: number }>(
        db,
        sql`
          with claimed as (
            update ingestion_jobs j
            set status = 'running', lease_owner = ${workerId}, attempts = j.attempts + 1, updated_at = now(),
                lease_expires_at = now() + ${leaseMs} * interval '1 millisecond'
            where j.id = (
              select id from ingestion_jobs
              where (status = 'queued' and run_after <= now())
                 or (status = 'running' and lease_expires_at < now() and attempts < max_attempts)
              order by run_after, created_at
              for update skip locked
              limit 1)
            returning j.id, j.document_id, j.attempts, j.max_attempts),
          marked as (
            update documents set status = 'processing', stage = 'parsing', chunks_embedded = null, chunks_total = null,
                   updated_at = now()
            where id = (select document_id from claimed))
          select * from claimed`,
      );
      if (!job) return undefined;
      return { jobId: job.id, documentId: job.document_id, attempts: job.attempts, maxAttempts: job.max_attempts };
    },

    /** Jobs whose worker died on their last allowed attempt end as failed, with their document. */
    async reapExhausted(): Promise<number> {
      const rows = await queryRows<{ document_id: string }>(
        db,
        sql`
          with dead as (
            update ingestion_jobs
            set status = 'failed', lease_owner = null, updated_at = now(),
                last_error = 'Processing was interrupted ' || attempts || ' times (a worker stopped or timed out)'
            where status = 'running' and lease_expires_at < now() and attempts >= max_attempts
            returning document_id, last_error)
          update documents d set status = 'failed', error = dead.last_error, ${noProgress}, updated_at = now()
          from dead where d.id = dead.document_id
          returning d.id as document_id`,
      );
      return rows.length;
    },

    /**
     * Renews the lease: `held`, or why the job is not this worker's any more: `lost` (its lease
     * expired and the job was claimed again or failed), `cancelled` (cancelled, superseded by a
     * replace, or its collection deleted) or `deleted` (its document deleted).
     */
    async heartbeat(jobId: string, workerId: string, leaseMs: number): Promise<'held' | JobEnd | 'lost'> {
      const [row] = await queryRows<{ held: boolean; status: string | null }>(
        db,
        sql`with renewed as (
              update ingestion_jobs set lease_expires_at = now() + ${leaseMs} * interval '1 millisecond'
              where id = ${jobId} and lease_owner = ${workerId} and status = 'running' returning id)
            select exists (select 1 from renewed) as held,
                   (select status from ingestion_jobs where id = ${jobId}) as status`,
      );
      return row?.held === true ? 'held' : endedBy(row?.status ?? null);
    },

    /** Why a job this worker no longer holds ended (see `heartbeat`). */
    async ending(jobId: string): Promise<JobEnd | 'lost'> {
      const [row] = await queryRows<{ status: string }>(db, sql`select status from ingestion_jobs where id = ${jobId}`);
      return endedBy(row?.status ?? null);
    },

    async document(job: ClaimedJob): Promise<JobDocument | undefined> {
      const [row] = await queryRows<{
        id: string;
        collection_id: string;
        format: string;
        original: Uint8Array;
        metadata: Record<string, unknown> | null;
        embedding_provider: string;
        embedding_model_resolved: string;
        dimensions: number;
        key_id: string | null;
      }>(
        db,
        sql`select d.id, d.collection_id, coalesce(j.format, d.format) as format,
                   coalesce(j.original, d.original) as original, coalesce(j.metadata, d.metadata) as metadata,
                   c.embedding_provider, c.embedding_model_resolved, c.dimensions, j.key_id
            from ingestion_jobs j join documents d on d.id = j.document_id join collections c on c.id = d.collection_id
            where j.id = ${job.jobId} and c.deleted_at is null`,
      );
      if (!row) return undefined;
      return {
        id: row.id,
        collectionId: row.collection_id,
        format: row.format,
        original: row.original,
        metadata: row.metadata,
        embeddingProvider: row.embedding_provider,
        embeddingModel: row.embedding_model_resolved,
        dimensions: row.dimensions,
        keyId: row.key_id,
      };
    },

    /**
     * Shows the job's stage and counts on its document. Returns false when the job is no longer
     * this worker's (cancelled, superseded by a replace, lease lost): the worker stops there.
     */
    async progress(
      job: ClaimedJob,
      workerId: string,
      stage: IngestionStage,
      counts: { embedded: number; total: number } | undefined,
    ): Promise<boolean> {
      const rows = await queryRows(
        db,
        sql`update documents set stage = ${stage}, chunks_embedded = ${counts?.embedded ?? null},
                   chunks_total = ${counts?.total ?? null}, updated_at = now()
            where id = ${job.documentId} and ${holds(job, workerId)} returning id`,
      );
      return rows.length > 0;
    },

    /**
     * Replaces the document's chunks and marks it processed, only while this worker still holds
     * the job. A replace's new content becomes the document's at once, so a search sees the
     * previous version or the new one, never both, never neither. A small document in one
     * transaction; a larger one a slice per transaction (`CommitSlicing`), hidden from searches
     * until the last one publishes it: on the embedded database a transaction holds the one
     * session, and one document of 3,106 chunks held it 24 s while every request waited. A large
     * version it replaces is hidden rather than removed ('retired': the caller removes it after,
     * `removeRetired`). Returns false
     * when the job is no longer held, or `signal` was aborted between two slices (what was
     * written stays hidden, and the next attempt removes it).
     */
    async complete(
      job: ClaimedJob,
      workerId: string,
      model: string,
      chunks: readonly EmbeddedChunk[],
      signal?: AbortSignal,
      /** What this version left out (see `documents.warning`). */
      warning: string | null = null,
    ): Promise<false | 'done' | 'retired'> {
      if (chunks.length <= slicing.singleMax) {
        let retired = false;
        const done = await db.transaction(async (tx) => {
          if ((await lockCollectionOf(tx, job)) === undefined) return false;
          if (!(await lockJob(tx, job, workerId))) return false;
          // Whether any chunk is there to replace (a first upload has none, unless an attempt
          // that stopped midway left some): read under the document's lock, so none can appear meanwhile.
          const [doc] = await queryRows<{ collection_id: string; has_chunks: boolean; staged: boolean }>(
            tx,
            sql`select collection_id, exists (select 1 from chunks c where c.document_id = d.id) as has_chunks,
                       exists (select 1 from chunk_staging s where s.document_id = d.id) as staged
                from documents d where id = ${job.documentId} for update`,
          );
          if (!doc) return false;
          retired = (await index.replaceDocument(job.documentId, doc.collection_id, model, chunks, tx, doc)).retired;
          await finish(tx, job, chunks.length, warning);
          return true;
        });
        return done && (retired ? 'retired' : 'done');
      }
      const collectionId = await db.transaction(async (tx) => {
        if ((await lockCollectionOf(tx, job)) === undefined) return undefined;
        if (!(await lockJob(tx, job, workerId))) return undefined;
        const [doc] = await queryRows<{ collection_id: string }>(
          tx,
          sql`select collection_id from documents where id = ${job.documentId} for update`,
        );
        if (doc) await index.beginStaged(job.documentId, doc.collection_id, tx);
        return doc?.collection_id;
      });
      if (collectionId === undefined) return false;
      let size = slicing.firstSlice;
      for (let at = 0; at < chunks.length;) {
        if (signal?.aborted) return false;
        const slice = chunks.slice(at, at + size);
        at += slice.length;
        // Timed inside the transaction: on the embedded database a slice first waits behind
        // requests' statements, and counting that wait made slices smaller the busier it was.
        const { value: added, ms } = await db.transaction((tx) =>
          timed(async () => {
            await lockCollection(tx, collectionId);
            return (
              (await lockJob(tx, job, workerId)) && index.addStaged(job.documentId, collectionId, model, slice, tx)
            );
          }),
        );
        if (!added) return false;
        const perChunk = Math.max(0.01, ms / slice.length);
        size = Math.max(1, Math.min(slicing.maxSlice, Math.floor(slicing.sliceMs / perChunk)));
      }
      return db.transaction(async (tx) => {
        await lockCollection(tx, collectionId);
        if (!(await lockJob(tx, job, workerId))) return false;
        const [doc] = await queryRows(tx, sql`select id from documents where id = ${job.documentId} for update`);
        const published = doc ? await index.publishStaged(job.documentId, collectionId, tx) : false;
        if (!published) return false;
        await finish(tx, job, chunks.length, warning);
        return published === 'retired' ? 'retired' : 'done';
      });
    },

    /** Removes the version a commit retired (`complete` answered 'retired'), a slice at a time. */
    removeRetired: (documentId: string) => index.removeRetired(documentId),

    /** Retries later (document back to pending), or fails for good (document failed with the error). */
    async fail(job: ClaimedJob, workerId: string, error: string, retryInMs: number | null): Promise<void> {
      await db.transaction(async (tx) => {
        const held = await queryRows(
          tx,
          sql`select id from ingestion_jobs where id = ${job.jobId} and lease_owner = ${workerId} for update`,
        );
        if (held.length === 0) return;
        // What an attempt wrote in slices and did not publish goes (hidden from searches, it
        // would still count in the keyword statistics).
        await index.dropStaged(job.documentId, tx);
        if (retryInMs !== null) {
          await tx.execute(
            sql`update ingestion_jobs set status = 'queued', lease_owner = null, lease_expires_at = null, last_error = ${error},
                run_after = now() + ${retryInMs} * interval '1 millisecond', updated_at = now() where id = ${job.jobId}`,
          );
          await tx.execute(
            sql`update documents set status = 'pending', ${noProgress}, updated_at = now() where id = ${job.documentId}`,
          );
        } else {
          await tx.execute(
            sql`update ingestion_jobs set status = 'failed', lease_owner = null, lease_expires_at = null, last_error = ${error},
                original = null, updated_at = now() where id = ${job.jobId}`,
          );
          // A failed replace leaves the previous version searchable (its chunks are untouched).
          await tx.execute(
            sql`update documents set status = 'failed', error = ${error}, ${noProgress}, updated_at = now()
                where id = ${job.documentId}`,
          );
        }
      });
    },

    /** On graceful shutdown: this worker's jobs go back to the queue, the attempt not counted. */
    async release(workerId: string): Promise<number> {
      const rows = await queryRows<{ document_id: string }>(
        db,
        sql`
          with released as (
            update ingestion_jobs set status = 'queued', lease_owner = null, lease_expires_at = null,
                   attempts = greatest(attempts - 1, 0), updated_at = now()
            where lease_owner = ${workerId} and status = 'running'
            returning document_id)
          update documents d set status = 'pending', ${noProgress}, updated_at = now()
          from released where d.id = released.document_id
          returning d.id as document_id`,
      );
      return rows.length;
    },

    /** The queue at a glance, for metrics: only unfinished jobs, read through the (status, run_after) index. */
    async queueStats() {
      const [row] = await queryRows<{
        ready: number;
        delayed: number;
        running: number;
        stalled: number;
        oldest: number | null;
      }>(
        db,
        sql`select count(*) filter (where status = 'queued' and run_after <= now())::int as ready,
                   count(*) filter (where status = 'queued' and run_after > now())::int as delayed,
                   count(*) filter (where status = 'running' and lease_expires_at >= now())::int as running,
                   count(*) filter (where status = 'running' and lease_expires_at < now())::int as stalled,
                   extract(epoch from now() - min(run_after) filter (where status = 'queued' and run_after <= now()))::float8 as oldest
            from ingestion_jobs where status in ('queued', 'running')`,
      );
      return {
        jobs: {
          ready: row?.ready ?? 0,
          delayed: row?.delayed ?? 0,
          running: row?.running ?? 0,
          stalled: row?.stalled ?? 0,
        },
        oldestReadySeconds: Math.max(0, row?.oldest ?? 0),
      };
    },

    async queueDepth(): Promise<number> {
      const [row] = await queryRows<{ n: number }>(
        db,
        sql`select count(*)::int as n from ingestion_jobs where status in ('queued', 'running')`,
      );
      return row?.n ?? 0;
    },
  };
}

export type JobsRepository = ReturnType<typeof createJobsRepository>;
