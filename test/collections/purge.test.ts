import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { createCollectionsRepository } from '../../src/collections/collections.repository.ts';
import { createCollectionPurger } from '../../src/collections/purge.ts';
import { createDocumentsRepository } from '../../src/documents/documents.repository.ts';
import { createLogger } from '../../src/logging.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import { until } from '../support/poll.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const quiet = createLogger('silent');

/** Rows of the collection left anywhere, by table. */
async function leftOf(collectionId: string) {
  const [row] = await queryRows<Record<string, number>>(
    t.database.db,
    sql`select (select count(*) from chunks where collection_id = ${collectionId})::int as chunks,
               (select count(*) from chunk_terms where collection_id = ${collectionId})::int as postings,
               (select count(*) from documents where collection_id = ${collectionId})::int as documents,
               (select count(*) from term_stats where collection_id = ${collectionId})::int as term_stats,
               (select count(*) from collection_stats where collection_id = ${collectionId})::int as collection_stats,
               (select count(*) from collections where id = ${collectionId})::int as collections,
               (select count(*) from pg_indexes where indexname = ${`chunks_hnsw_${collectionId}`})::int as indexes`,
  );
  return row as {
    chunks: number;
    postings: number;
    documents: number;
    term_stats: number;
    collection_stats: number;
    collections: number;
    /** Its vector index. */
    indexes: number;
  };
}

const nothingLeft = {
  chunks: 0,
  postings: 0,
  documents: 0,
  term_stats: 0,
  collection_stats: 0,
  collections: 0,
  indexes: 0,
};

/** A collection of `n` processed documents of a few chunks each. */
async function filled(name: string, n: number, word: string) {
  const { id } = await createCollection(t, name);
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const response = await t.request(`/api/v1/rag/collections/${name}/documents`, {
      method: 'POST',
      json: { name: `${word}-${i}.txt`, content: `${word} number ${i} of the ${name} set. `.repeat(60) },
    });
    expect(response.status).toBe(202);
    ids.push(((await response.json()) as { id: string }).id);
  }
  for (const doc of ids) expect((await waitForDocument(t, doc)).status).toBe('processed');
  return { id, ids };
}

const search = (collection: string, query: string) =>
  t.request('/api/v1/agent/tool-calling', {
    method: 'POST',
    json: { tool_name: 'rag_search', parameters: { collection, query, top_k: 50, similarity_threshold: -1 } },
  });

describe('deleting a collection', () => {
  it('is gone for every request at once; its name is free; its rows are purged after', async () => {
    const old = await filled('reborn', 4, 'walrus');
    expect((await leftOf(old.id)).postings).toBeGreaterThan(0);

    const del = await t.request('/api/v1/rag/collections/reborn', { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect(await del.json()).toEqual({ message: 'Collection deleted' });
    // Whatever the purger has done by now, nothing of it is visible.
    expect((await t.request('/api/v1/rag/collections/reborn')).status).toBe(404);
    expect((await search('reborn', 'walrus')).status).toBe(404);
    for (const doc of old.ids) expect((await t.request(`/api/v1/rag/documents/${doc}`)).status).toBe(404);
    const list = (await (await t.request('/api/v1/rag/collections')).json()) as { collections: { name: string }[] };
    expect(list.collections.map((c) => c.name)).not.toContain('reborn');

    // The same name again, at once: a new collection, holding only what is uploaded to it now.
    const reborn = await filled('reborn', 1, 'otter');
    expect(reborn.id).not.toBe(old.id);
    const found = (await (await search('reborn', 'walrus otter')).json()) as { results: { document_id: string }[] };
    expect(found.results.length, JSON.stringify(found)).toBeGreaterThan(0);
    expect(new Set(found.results.map((r) => r.document_id))).toEqual(new Set(reborn.ids));
    const detail = (await (await t.request('/api/v1/rag/collections/reborn')).json()) as { document_count: number };
    expect(detail.document_count).toBe(1);

    await until('the old collection purged', async () => {
      const left = await leftOf(old.id);
      return Object.values(left).every((n) => n === 0) ? left : undefined;
    });
    expect(await leftOf(old.id)).toEqual(nothingLeft);
    // The new one is untouched by the purge.
    expect((await leftOf(reborn.id)).chunks).toBeGreaterThan(0);
    const purged = t.logs.find((l) => l.msg === 'deleted collection purged' && l.collection_id === old.id);
    expect(purged).toMatchObject({ collection: 'reborn', documents: 4 });
  });

  it('purges in short transactions, and a purge stopped half-way is finished by the next purger', async () => {
    const doomed = await filled('sliced', 3, 'heron');
    const before = await leftOf(doomed.id);
    expect(before.chunks).toBeGreaterThanOrEqual(6);
    // Marked by the repository directly: the app's purger is not woken (it polls once a minute).
    expect(await createCollectionsRepository(t.database.db).markDeleted(doomed.id)).toBe(true);
    expect(await createCollectionsRepository(t.database.db).markDeleted(doomed.id)).toBe(false);

    const seen: { table: string; rows: number }[] = [];
    const slicing = { sliceMs: 60_000, firstRows: 2, maxRows: 2 };
    const first = createCollectionPurger({
      db: t.database.db,
      logger: quiet,
      slicing,
      onSlice: (table, rows) => {
        seen.push({ table, rows });
        if (seen.length === 2) void first.stop();
      },
    });
    first.start();
    await until('the first purger stopped', () => seen.length >= 2);
    await first.stop();
    expect(seen).toEqual([
      { table: 'chunks', rows: 2 },
      { table: 'chunks', rows: 2 },
    ]);
    const half = await leftOf(doomed.id);
    expect(half).toMatchObject({ chunks: before.chunks - 4, documents: 3, collections: 1, indexes: 0 });
    // Half-purged, it is still invisible.
    expect((await t.request('/api/v1/rag/collections/sliced')).status).toBe(404);
    expect((await t.request(`/api/v1/rag/documents/${doomed.ids[0]}`)).status).toBe(404);

    const slices: string[] = [];
    const next = createCollectionPurger({
      db: t.database.db,
      logger: quiet,
      slicing,
      onSlice: (table, rows) => slices.push(`${table}:${rows}`),
    });
    expect(await next.runOnce()).toBe(1);
    expect(await leftOf(doomed.id)).toEqual(nothingLeft);
    // Never more than two rows of a table in one transaction: every slice said so.
    expect(slices.every((s) => ['1', '2', '0'].includes(s.split(':')[1] as string))).toBe(true);
    expect(slices.filter((s) => s.startsWith('documents:') && !s.endsWith(':0'))).toHaveLength(2);
    expect(await next.runOnce()).toBe(0);
  });

  it.runIf(Boolean(process.env.TEST_DATABASE_URL))(
    "neither it nor any other collection's searches wait for a slow reader of the chunks table",
    async () => {
      await filled('doomed-slow', 1, 'lynx');
      await filled('bystander', 1, 'marten');
      // Another session reads chunks in a transaction it keeps open for 6 s (a report, a backup,
      // a slow search): a lock on the table every collection's chunks share.
      const reader = new pg.Client({ connectionString: t.databaseUrl });
      await reader.connect();
      await reader.query('begin');
      await reader.query('select count(*) from chunks');
      let releasedAt = Infinity;
      const release = new Promise<void>((resolve) =>
        setTimeout(() => {
          releasedAt = performance.now();
          void reader.query('commit').finally(() => resolve());
        }, 6_000),
      );
      try {
        const deleted = await t.request('/api/v1/rag/collections/doomed-slow', { method: 'DELETE' });
        expect(deleted.status).toBe(200);
        const found = await search('bystander', 'marten');
        expect(found.status).toBe(200);
        const answeredAt = performance.now();
        // Both answered while the reader still held its transaction.
        expect(answeredAt).toBeLessThan(releasedAt);
      } finally {
        await release;
        await reader.end();
      }
    },
  );

  it('an upload racing the deletion is refused, not stored in the deleted collection', async () => {
    const { id } = await createCollection(t, 'raced');
    const collections = createCollectionsRepository(t.database.db);
    // What the upload looked up before the deletion committed: the collection's row.
    expect(await collections.markDeleted(id)).toBe(true);
    const inserted = await createDocumentsRepository(t.database.db).insertWithJob(
      {
        id: 'doc_raced',
        collectionId: id,
        name: 'late.txt',
        contentType: 'text/plain',
        format: 'text',
        sizeBytes: 4,
        sha256: 'f'.repeat(64),
        original: new TextEncoder().encode('late'),
      },
      { id: 'job_raced', keyId: 'key_test' },
    );
    expect(inserted).toBeUndefined();
    const [row] = await queryRows<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from documents where id = 'doc_raced'`,
    );
    expect(row?.n).toBe(0);
  });

  it('cancels its unfinished jobs, and a waiter on one of its documents gets a 404 at once', async () => {
    const { id } = await createCollection(t, 'busy-doomed');
    // Enough text that the job is still queued or running when the deletion comes.
    const response = await t.request('/api/v1/rag/collections/busy-doomed/documents', {
      method: 'POST',
      json: { name: 'long.txt', content: 'Kestrels hover over the field before they stoop. '.repeat(4_000) },
    });
    const docId = ((await response.json()) as { id: string }).id;
    const waiting = t.request(`/api/v1/rag/documents/${docId}?wait=true&timeout=60`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = performance.now();
    expect((await t.request('/api/v1/rag/collections/busy-doomed', { method: 'DELETE' })).status).toBe(200);
    const answer = await waiting;
    expect(answer.status).toBe(404);
    expect(performance.now() - started).toBeLessThan(10_000);
    await until('the collection purged', async () => Object.values(await leftOf(id)).every((n) => n === 0));
  });
});
