import { and, count, desc, eq, inArray, isNull, sql } from '../db/orm.ts';
import { queryRows, type Db } from '../db/client.ts';
import { retryOnDeadlock } from '../db/errors.ts';
import { collections } from '../db/schema/collections.ts';
import { documents, type DocumentRow } from '../db/schema/documents.ts';
import { ingestionJobs } from '../db/schema/jobs.ts';
import { inSlices, timed, type Slicing } from '../db/slicing.ts';
import { runInBackground } from '../db/priority.ts';
import { createIndexRepository } from '../retrieval/index.repository.ts';

/** Every column but the original bytes, which only the ingestion worker reads. */
const columns = {
  id: documents.id,
  collectionId: documents.collectionId,
  name: documents.name,
  description: documents.description,
  metadata: documents.metadata,
  contentType: documents.contentType,
  format: documents.format,
  sizeBytes: documents.sizeBytes,
  sha256: documents.sha256,
  status: documents.status,
  error: documents.error,
  warning: documents.warning,
  chunkCount: documents.chunkCount,
  processedAt: documents.processedAt,
  version: documents.version,
  replacedAt: documents.replacedAt,
  stage: documents.stage,
  chunksEmbedded: documents.chunksEmbedded,
  chunksTotal: documents.chunksTotal,
  createdAt: documents.createdAt,
  updatedAt: documents.updatedAt,
};
const summary = { ...columns, collectionName: collections.name };

export type DocumentSummary = Omit<DocumentRow, 'original'> & { collectionName: string };

export type NewDocument = Omit<typeof documents.$inferInsert, 'status' | 'chunkCount' | 'createdAt' | 'updatedAt'>;

/** A replace's new content: it becomes the document's when its chunks commit. */
export type NewVersion = Pick<
  NewDocument,
  'name' | 'description' | 'metadata' | 'contentType' | 'format' | 'sizeBytes' | 'sha256' | 'original'
>;

/** The advisory-lock space of per-document writes (the two-key form: apart from the migration lock). */
const DOCUMENT_WRITES = 0x646f63; // 'doc'

/**
 * The first step of a replace or a cancel: one of them at a time per document (held to the
 * transaction's end), then the document's unfinished jobs locked, then the document row, in the
 * order the worker takes them (job, then document). Without the first lock two replaces could
 * interleave — the second reads the jobs before the first commits its new one, a worker claims
 * that job and waits for the document the second holds, and the second waits for the job — a
 * cycle PostgreSQL breaks by failing a request (seen: 1 in 6 concurrent replaces answered 500).
 */
async function lockForWrite(tx: Db, documentId: string): Promise<{ id: string }[]> {
  await tx.execute(sql`select pg_advisory_xact_lock(${DOCUMENT_WRITES}, hashtext(${documentId}))`);
  return queryRows<{ id: string }>(
    tx,
    sql`select id from ingestion_jobs where document_id = ${documentId} and status in ('queued', 'running') for update`,
  );
}

/** Ends the document's unfinished jobs (a worker holding one stops at its next batch). */
const endActiveJobs = (tx: Db, documentId: string, reason: string) =>
  tx.execute(
    sql`update ingestion_jobs set status = 'cancelled', lease_owner = null, lease_expires_at = null,
          last_error = ${reason}, original = null, updated_at = now()
        where document_id = ${documentId} and status in ('queued', 'running')`,
  );

/** The job a write queues, and the key that asked (whose usage its upstream embedding counts in). */
export interface QueuedJob {
  id: string;
  keyId: string;
}

/** Documents of more chunks than `above` are deleted in slices of about `sliceMs` (see `delete`). */
export interface RemovalSlicing extends Slicing {
  above: number;
}

export const DOCUMENT_REMOVAL: RemovalSlicing = { above: 128, sliceMs: 20, firstRows: 16, maxRows: 2_000 };

export function createDocumentsRepository(db: Db, removal: RemovalSlicing = DOCUMENT_REMOVAL) {
  const index = createIndexRepository(db);

  /**
   * The chunks of a document hidden for deletion, a slice per transaction (background work:
   * requests' statements first), then the document's row with whatever a replace that began
   * meanwhile wrote. Also how a deletion interrupted by a stop or a crash is finished (purge.ts).
   */
  const removeHidden = async (id: string, collectionId: string): Promise<void> => {
    await inSlices(removal, (rows) =>
      runInBackground(() =>
        retryOnDeadlock(() => db.transaction((tx) => timed(() => index.removeHiddenSlice(id, collectionId, rows, tx)))),
      ),
    );
    await runInBackground(() =>
      retryOnDeadlock(() =>
        db.transaction(async (tx) => {
          await lockForWrite(tx, id);
          const [doc] = await queryRows(tx, sql`select id from documents where id = ${id} for update`);
          if (doc === undefined) return;
          await index.removeDocument(id, collectionId, tx);
          await tx.delete(documents).where(eq(documents.id, id));
        }),
      ),
    );
  };

  return {
    /**
     * The document and its ingestion job commit together, or neither does. Returns the row as
     * committed, or undefined when the collection was deleted meanwhile (its deletion locks the
     * row, so the two are ordered).
     */
    async insertWithJob(row: NewDocument, job: QueuedJob): Promise<Omit<DocumentRow, 'original'> | undefined> {
      return db.transaction(async (tx) => {
        const live = await queryRows(
          tx,
          sql`select 1 from collections where id = ${row.collectionId} and deleted_at is null for key share`,
        );
        if (live.length === 0) return undefined;
        const [created] = await tx.insert(documents).values(row).returning(columns);
        if (!created) throw new Error('insert returned no row');
        await tx.insert(ingestionJobs).values({ id: job.id, documentId: row.id, keyId: job.keyId });
        return created;
      });
    },

    /**
     * The document of the collection that holds this content: as its current version, as a first
     * upload or a replace under way, or as a first upload that never completed (failed or
     * cancelled: its row keeps the bytes, and the unique index on them). For a replace of
     * `replacing`, that document's own first upload does not count once it has ended without
     * completing (no current version, and no job without content of its own, which is the first
     * upload's, under way): sending the same bytes again is how a client retries it.
     */
    async findBySha(collectionId: string, sha256: string, replacing?: string): Promise<{ id: string } | undefined> {
      const retry =
        replacing === undefined
          ? sql``
          : sql`and not (d.id = ${replacing} and d.processed_at is null and not exists (
              select 1 from ingestion_jobs j where j.document_id = d.id and j.status in ('queued', 'running')
                and j.sha256 is null))`;
      const [row] = await queryRows<{ id: string }>(
        db,
        sql`select d.id from documents d where d.collection_id = ${collectionId} and d.sha256 = ${sha256} ${retry}
            limit 1`,
      );
      if (row) return row;
      const [pending] = await queryRows<{ id: string }>(
        db,
        sql`select j.document_id as id from ingestion_jobs j join documents d on d.id = j.document_id
            where j.status in ('queued', 'running') and j.sha256 = ${sha256} and d.collection_id = ${collectionId}
            limit 1`,
      );
      return pending;
    },

    /**
     * Queues a new version of the document: the job carries its content, and the document keeps
     * its current version (searchable) until the job commits. An unfinished earlier job is
     * superseded. Returns the row as committed, or undefined when the document is gone.
     */
    async replaceWithJob(
      id: string,
      content: NewVersion,
      job: QueuedJob,
    ): Promise<Omit<DocumentRow, 'original'> | undefined> {
      return retryOnDeadlock(() =>
        db.transaction(async (tx) => {
          await lockForWrite(tx, id);
          const [doc] = await queryRows<{ version: number }>(
            tx,
            sql`select version from documents where id = ${id} for update`,
          );
          if (!doc) return undefined;
          const [latest] = await queryRows<{ version: number }>(
            tx,
            sql`select coalesce(max(version), 0)::int as version from ingestion_jobs where document_id = ${id}`,
          );
          const version = Math.max(doc.version, latest?.version ?? 0) + 1;
          await endActiveJobs(tx, id, `Superseded by version ${version}`);
          await tx.insert(ingestionJobs).values({ id: job.id, documentId: id, keyId: job.keyId, version, ...content });
          const [updated] = await tx
            .update(documents)
            .set({
              status: 'pending',
              error: null,
              stage: null,
              chunksEmbedded: null,
              chunksTotal: null,
              updatedAt: sql`now()`,
            })
            .where(eq(documents.id, id))
            .returning(columns);
          return updated;
        }),
      );
    },

    /**
     * Stops the document's unfinished job. The document ends `cancelled`, or back at `processed`
     * when it has a searchable version (a cancelled replace keeps the previous one). Returns
     * 'idle' when there was nothing to cancel, undefined when the document is gone.
     */
    async cancel(id: string): Promise<'cancelled' | 'idle' | undefined> {
      return retryOnDeadlock(() =>
        db.transaction(async (tx) => {
          const active = await lockForWrite(tx, id);
          const [doc] = await queryRows(tx, sql`select id from documents where id = ${id} for update`);
          if (!doc) return undefined;
          if (active.length === 0) return 'idle';
          await endActiveJobs(tx, id, 'Cancelled');
          await tx.execute(
            sql`update documents set status = case when processed_at is null then 'cancelled' else 'processed' end,
                error = null, stage = null, chunks_embedded = null, chunks_total = null, updated_at = now()
              where id = ${id}`,
          );
          return 'cancelled';
        }),
      );
    },

    async get(id: string): Promise<DocumentSummary | undefined> {
      const [row] = await db
        .select(summary)
        .from(documents)
        .innerJoin(collections, eq(collections.id, documents.collectionId))
        .where(and(eq(documents.id, id), isNull(collections.deletedAt)))
        .limit(1);
      return row;
    },

    async list(
      collectionId: string,
      page: number,
      pageSize: number,
    ): Promise<{ rows: DocumentSummary[]; total: number }> {
      // The page's ids first, from the (collection, created_at, id) index alone: an offset read
      // directly skipped through every earlier document's row (page 200 of a 5,183-document
      // collection: ~4,000 rows read to return 20).
      const pageIds = db
        .select({ id: documents.id })
        .from(documents)
        .where(eq(documents.collectionId, collectionId))
        .orderBy(desc(documents.createdAt), desc(documents.id))
        .limit(pageSize)
        .offset((page - 1) * pageSize);
      const rows = await db
        .select(summary)
        .from(documents)
        .innerJoin(collections, eq(collections.id, documents.collectionId))
        .where(inArray(documents.id, pageIds))
        .orderBy(desc(documents.createdAt), desc(documents.id));
      const [total] = await db.select({ n: count() }).from(documents).where(eq(documents.collectionId, collectionId));
      return { rows, total: total?.n ?? 0 };
    },

    /**
     * A new description or metadata. A replace in progress takes both from its job when it
     * commits, so the job gets the change too: before, the replace put back what it was queued
     * with, and a PUT answered 200 meanwhile was undone without a word.
     */
    async update(id: string, patch: { description?: string; metadata?: Record<string, unknown> }): Promise<void> {
      await retryOnDeadlock(() =>
        db.transaction(async (tx) => {
          // The job's row before the document's, as the worker committing a replace takes them.
          const active = await lockForWrite(tx, id);
          if (active.length > 0) {
            await tx
              .update(ingestionJobs)
              .set({
                ...(patch.description === undefined ? {} : { description: patch.description }),
                ...(patch.metadata === undefined ? {} : { metadata: patch.metadata }),
              })
              .where(
                inArray(
                  ingestionJobs.id,
                  active.map((job) => job.id),
                ),
              );
          }
          await tx
            .update(documents)
            .set({ ...patch, updatedAt: sql`now()` })
            .where(eq(documents.id, id));
        }),
      );
    },

    /**
     * Deletes the document; its chunks, postings, BM25 statistics and jobs go with it. One
     * transaction for a document of up to `removal.above` chunks. A larger one would hold the
     * embedded database for as long (3,106 chunks: ~0.4 s, every request waiting): its chunks are
     * hidden from searches at once and its jobs cancelled, then removed in short transactions
     * (`removeHidden`), the row last. Returns false when the document is gone.
     */
    async delete(id: string): Promise<boolean> {
      const begun = await retryOnDeadlock(() =>
        db.transaction(async (tx) => {
          await lockForWrite(tx, id);
          const [doc] = await queryRows<{ collection_id: string }>(
            tx,
            sql`select collection_id from documents where id = ${id} for update`,
          );
          if (!doc) return undefined;
          const [chunks] = await queryRows<{ n: number }>(
            tx,
            sql`select count(*)::int as n from chunks where document_id = ${id}`,
          );
          if ((chunks?.n ?? 0) <= removal.above) {
            await index.removeDocument(id, doc.collection_id, tx);
            await tx.delete(documents).where(eq(documents.id, id));
            return 'deleted';
          }
          await endActiveJobs(tx, id, 'Document deleted');
          await index.hideDocument(id, doc.collection_id, tx);
          return { collectionId: doc.collection_id };
        }),
      );
      if (begun === undefined) return false;
      if (begun !== 'deleted') await removeHidden(id, begun.collectionId);
      return true;
    },

    removeHidden,

    /** A document being deleted whose removal nobody may be finishing (a stop or a crash interrupted it). */
    async hiddenForRemoval(): Promise<{ documentId: string; collectionId: string } | undefined> {
      const [row] = await queryRows<{ document_id: string; collection_id: string }>(
        db,
        sql`select s.document_id, s.collection_id from chunk_staging s
            join collections c on c.id = s.collection_id and c.deleted_at is null
            where s.first_chunk_id = 0 limit 1`,
      );
      return row && { documentId: row.document_id, collectionId: row.collection_id };
    },
  };
}

export type DocumentsRepository = ReturnType<typeof createDocumentsRepository>;
