import { eq, sql } from '../db/orm.ts';
import { queryRows, type Db } from '../db/client.ts';
import { collections, type CollectionRow } from '../db/schema/collections.ts';
import { createIndexRepository } from '../retrieval/index.repository.ts';

export interface CollectionWithCounts extends CollectionRow {
  documentCount: number;
  chunkCount: number;
}

const safeId = /^col_[A-Za-z0-9]+$/;

/**
 * Each collection has its own partial HNSW index over its chunks, cast to its dimension: vectors
 * of different models share one table, and a search in one collection walks only its own graph.
 */
function indexName(collectionId: string): string {
  if (!safeId.test(collectionId)) throw new Error(`unexpected collection id ${collectionId}`);
  return `"chunks_hnsw_${collectionId}"`;
}

export interface HnswSettings {
  m: number;
  efConstruction: number;
}

interface CountsRow {
  id: string;
  document_count: number;
  chunk_count: number;
}

// Counts come from processed documents at read time, so they are always true to the database. A
// document being replaced counts: its previous version stays searchable until the new one commits.
// Per collection, from documents_collection_processed_idx alone (an index-only scan).
export const collectionCountsSql = (where: ReturnType<typeof sql>) => sql`
  select c.id, n.document_count, n.chunk_count
  from collections c
  cross join lateral (
    select count(*)::int as document_count, coalesce(sum(d.chunk_count), 0)::int as chunk_count
    from documents d where d.collection_id = c.id and d.processed_at is not null) n
  where ${where}`;

export function createCollectionsRepository(db: Db) {
  const index = createIndexRepository(db);
  const withCounts = async (rows: CollectionRow[], where: ReturnType<typeof sql>): Promise<CollectionWithCounts[]> => {
    if (rows.length === 0) return [];
    const counts = new Map((await queryRows<CountsRow>(db, collectionCountsSql(where))).map((r) => [r.id, r]));
    return rows.map((row) => ({
      ...row,
      documentCount: counts.get(row.id)?.document_count ?? 0,
      chunkCount: counts.get(row.id)?.chunk_count ?? 0,
    }));
  };

  return {
    /** Creates the row and its vector index in one transaction. */
    async insert(row: typeof collections.$inferInsert, hnsw: HnswSettings): Promise<CollectionRow> {
      return db.transaction(async (tx) => {
        const [created] = await tx.insert(collections).values(row).returning();
        if (!created) throw new Error('insert returned no row');
        await index.openCollection(created.id, tx);
        await tx.execute(
          sql.raw(
            `create index ${indexName(created.id)} on chunks using hnsw ((embedding::vector(${created.dimensions})) vector_cosine_ops) ` +
              `with (m = ${hnsw.m}, ef_construction = ${hnsw.efConstruction}) where collection_id = '${created.id}'`,
          ),
        );
        return created;
      });
    },

    async findByName(name: string): Promise<CollectionWithCounts | undefined> {
      const rows = await db.select().from(collections).where(eq(collections.name, name)).limit(1);
      const [found] = await withCounts(rows, sql`c.name = ${name}`);
      return found;
    },

    async findRowByName(name: string): Promise<CollectionRow | undefined> {
      const [row] = await db.select().from(collections).where(eq(collections.name, name)).limit(1);
      return row;
    },

    async findRowById(id: string): Promise<CollectionRow | undefined> {
      const [row] = await db.select().from(collections).where(eq(collections.id, id)).limit(1);
      return row;
    },

    async list(names: readonly string[] | null): Promise<CollectionWithCounts[]> {
      const filter = names === null ? sql`true` : sql`c.name = any(${sql.param([...names])}::text[])`;
      const rows = await db
        .select()
        .from(collections)
        .where(names === null ? sql`true` : sql`${collections.name} = any(${sql.param([...names])}::text[])`)
        .orderBy(collections.createdAt, collections.id);
      return withCounts(rows, filter);
    },

    async updateDescription(id: string, description: string): Promise<void> {
      await db
        .update(collections)
        .set({ description, updatedAt: sql`now()` })
        .where(eq(collections.id, id));
    },

    /** Documents, chunks and jobs go by cascade, the index explicitly, all in one transaction. */
    async delete(id: string): Promise<boolean> {
      return db.transaction(async (tx) => {
        const deleted = await tx.delete(collections).where(eq(collections.id, id)).returning({ id: collections.id });
        if (deleted.length === 0) return false;
        await tx.execute(sql.raw(`drop index if exists ${indexName(id)}`));
        return true;
      });
    },
  };
}

export type CollectionsRepository = ReturnType<typeof createCollectionsRepository>;
