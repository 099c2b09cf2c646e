import { and, count, desc, eq, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { collections } from '../db/schema/collections.ts';
import { documents, type DocumentRow } from '../db/schema/documents.ts';
import { ingestionJobs } from '../db/schema/jobs.ts';
import { removeChunks } from '../ingestion/jobs.repository.ts';

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
  chunkCount: documents.chunkCount,
  processedAt: documents.processedAt,
  createdAt: documents.createdAt,
  updatedAt: documents.updatedAt,
};
const summary = { ...columns, collectionName: collections.name };

export type DocumentSummary = Omit<DocumentRow, 'original'> & { collectionName: string };

export type NewDocument = Omit<typeof documents.$inferInsert, 'status' | 'chunkCount' | 'createdAt' | 'updatedAt'>;

export function createDocumentsRepository(db: Db) {
  return {
    /** The document and its ingestion job commit together, or neither does. Returns the row as committed. */
    async insertWithJob(row: NewDocument, jobId: string): Promise<Omit<DocumentRow, 'original'>> {
      return db.transaction(async (tx) => {
        const [created] = await tx.insert(documents).values(row).returning(columns);
        if (!created) throw new Error('insert returned no row');
        await tx.insert(ingestionJobs).values({ id: jobId, documentId: row.id });
        return created;
      });
    },

    async findBySha(collectionId: string, sha256: string): Promise<{ id: string } | undefined> {
      const [row] = await db
        .select({ id: documents.id })
        .from(documents)
        .where(and(eq(documents.collectionId, collectionId), eq(documents.sha256, sha256)))
        .limit(1);
      return row;
    },

    async get(id: string): Promise<DocumentSummary | undefined> {
      const [row] = await db
        .select(summary)
        .from(documents)
        .innerJoin(collections, eq(collections.id, documents.collectionId))
        .where(eq(documents.id, id))
        .limit(1);
      return row;
    },

    async list(
      collectionId: string,
      page: number,
      pageSize: number,
    ): Promise<{ rows: DocumentSummary[]; total: number }> {
      const rows = await db
        .select(summary)
        .from(documents)
        .innerJoin(collections, eq(collections.id, documents.collectionId))
        .where(eq(documents.collectionId, collectionId))
        .orderBy(desc(documents.createdAt), desc(documents.id))
        .limit(pageSize)
        .offset((page - 1) * pageSize);
      const [total] = await db.select({ n: count() }).from(documents).where(eq(documents.collectionId, collectionId));
      return { rows, total: total?.n ?? 0 };
    },

    async update(id: string, patch: { description?: string; metadata?: Record<string, unknown> }): Promise<void> {
      await db
        .update(documents)
        .set({ ...patch, updatedAt: sql`now()` })
        .where(eq(documents.id, id));
    },

    /** Chunks, postings, BM25 statistics and the job go with it, in one transaction. */
    async delete(id: string): Promise<boolean> {
      return db.transaction(async (tx) => {
        const [doc] = await tx
          .select({ collectionId: documents.collectionId })
          .from(documents)
          .where(eq(documents.id, id))
          .for('update');
        if (!doc) return false;
        await removeChunks(tx, id, doc.collectionId);
        await tx.delete(documents).where(eq(documents.id, id));
        return true;
      });
    },
  };
}

export type DocumentsRepository = ReturnType<typeof createDocumentsRepository>;
