import { sql } from 'drizzle-orm';
import { queryRows, type Db } from '../db/client.ts';
import { chunks as chunksTable } from '../db/schema/chunks.ts';
import type { Chunk } from './chunker.ts';

export interface ClaimedJob {
  jobId: string;
  documentId: string;
  attempts: number;
  maxAttempts: number;
}

export interface JobDocument {
  id: string;
  collectionId: string;
  format: string;
  original: Uint8Array;
  metadata: Record<string, unknown> | null;
  embeddingProvider: string;
  embeddingModel: string;
}

export interface EmbeddedChunk extends Chunk {
  embedding: Float32Array;
  /** Keyword-analyzer term frequencies and length, for the BM25 index. */
  terms: Map<string, number>;
  termCount: number;
}

const INSERT_BATCH = 200;

/**
 * Deletes a document's chunks (postings go by cascade) and takes them out of the collection's
 * BM25 statistics, in the caller's transaction. The collection's statistics row is locked first,
 * so every writer of one collection's term statistics queues on it and they cannot deadlock.
 */
export async function removeChunks(tx: Db, documentId: string, collectionId: string): Promise<void> {
  await tx.execute(sql`
    update collection_stats set
      chunk_count = chunk_count - (select count(*) from chunks where document_id = ${documentId}),
      total_terms = total_terms - (select coalesce(sum(term_count), 0) from chunks where document_id = ${documentId})
    where collection_id = ${collectionId}`);
  await tx.execute(sql`
    update term_stats s set df = s.df - g.n
    from (select term, count(*)::int as n from chunk_terms
          where chunk_id in (select id from chunks where document_id = ${documentId}) group by term) g
    where s.collection_id = ${collectionId} and s.term = g.term`);
  await tx.execute(sql`delete from chunks where document_id = ${documentId}`);
}

/**
 * The ingestion queue. Every state change of a job is guarded by its lease owner, so a worker
 * that lost its lease (it stalled, another took over) can never write a second set of chunks.
 */
export function createJobsRepository(db: Db) {
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
            update documents set status = 'processing', updated_at = now()
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
          update documents d set status = 'failed', error = dead.last_error, updated_at = now()
          from dead where d.id = dead.document_id
          returning d.id as document_id`,
      );
      return rows.length;
    },

    async heartbeat(jobId: string, workerId: string, leaseMs: number): Promise<boolean> {
      const rows = await queryRows(
        db,
        sql`update ingestion_jobs set lease_expires_at = now() + ${leaseMs} * interval '1 millisecond'
            where id = ${jobId} and lease_owner = ${workerId} and status = 'running' returning id`,
      );
      return rows.length > 0;
    },

    async document(documentId: string): Promise<JobDocument | undefined> {
      const [row] = await queryRows<{
        id: string;
        collection_id: string;
        format: string;
        original: Uint8Array;
        metadata: Record<string, unknown> | null;
        embedding_provider: string;
        embedding_model_resolved: string;
      }>(
        db,
        sql`select d.id, d.collection_id, d.format, d.original, d.metadata, c.embedding_provider, c.embedding_model_resolved
            from documents d join collections c on c.id = d.collection_id where d.id = ${documentId}`,
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
      };
    },

    /**
     * Replaces the document's chunks and marks it processed, in one transaction, only while this
     * worker still holds the job. Returns false when it does not (nothing is written).
     */
    async complete(
      job: ClaimedJob,
      workerId: string,
      model: string,
      chunks: readonly EmbeddedChunk[],
    ): Promise<boolean> {
      return db.transaction(async (tx) => {
        const held = await queryRows(
          tx,
          sql`select id from ingestion_jobs where id = ${job.jobId} and lease_owner = ${workerId} and status = 'running' for update`,
        );
        if (held.length === 0) return false;
        const [doc] = await queryRows<{ collection_id: string }>(
          tx,
          sql`select collection_id from documents where id = ${job.documentId} for update`,
        );
        if (!doc) return false;
        await removeChunks(tx, job.documentId, doc.collection_id);
        let terms = 0;
        for (let i = 0; i < chunks.length; i += INSERT_BATCH) {
          const batch = chunks.slice(i, i + INSERT_BATCH);
          const ids = await tx
            .insert(chunksTable)
            .values(
              batch.map((c) => ({
                documentId: job.documentId,
                collectionId: doc.collection_id,
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
            [...c.terms].map(([term, tf]) => ({
              term,
              chunkId: idOf.get(c.position) as number,
              tf,
              length: c.termCount,
            })),
          );
          terms += batch.reduce((n, c) => n + c.termCount, 0);
          if (postings.length > 0) {
            await tx.execute(sql`
              insert into chunk_terms (collection_id, term, chunk_id, tf, length)
              select ${doc.collection_id}, * from unnest(
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
            select ${doc.collection_id}, * from unnest(${sql.param(sorted)}::text[], ${sql.param(sorted.map((t) => df.get(t) as number))}::int[])
            on conflict (collection_id, term) do update set df = term_stats.df + excluded.df`);
        }
        await tx.execute(sql`
          insert into collection_stats (collection_id, chunk_count, total_terms)
          values (${doc.collection_id}, ${chunks.length}, ${terms})
          on conflict (collection_id) do update set chunk_count = collection_stats.chunk_count + excluded.chunk_count,
            total_terms = collection_stats.total_terms + excluded.total_terms`);
        await tx.execute(
          sql`update documents set status = 'processed', error = null, chunk_count = ${chunks.length},
              processed_at = now(), updated_at = now() where id = ${job.documentId}`,
        );
        await tx.execute(
          sql`update ingestion_jobs set status = 'done', lease_owner = null, lease_expires_at = null, last_error = null,
              updated_at = now() where id = ${job.jobId}`,
        );
        return true;
      });
    },

    /** Retries later (document back to pending), or fails for good (document failed with the error). */
    async fail(job: ClaimedJob, workerId: string, error: string, retryInMs: number | null): Promise<void> {
      await db.transaction(async (tx) => {
        const held = await queryRows(
          tx,
          sql`select id from ingestion_jobs where id = ${job.jobId} and lease_owner = ${workerId} for update`,
        );
        if (held.length === 0) return;
        if (retryInMs !== null) {
          await tx.execute(
            sql`update ingestion_jobs set status = 'queued', lease_owner = null, lease_expires_at = null, last_error = ${error},
                run_after = now() + ${retryInMs} * interval '1 millisecond', updated_at = now() where id = ${job.jobId}`,
          );
          await tx.execute(
            sql`update documents set status = 'pending', updated_at = now() where id = ${job.documentId}`,
          );
        } else {
          await tx.execute(
            sql`update ingestion_jobs set status = 'failed', lease_owner = null, lease_expires_at = null, last_error = ${error},
                updated_at = now() where id = ${job.jobId}`,
          );
          await tx.execute(
            sql`update documents set status = 'failed', error = ${error}, updated_at = now() where id = ${job.documentId}`,
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
          update documents d set status = 'pending', updated_at = now()
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
