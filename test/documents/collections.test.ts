import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { collectionCountsSql } from '../../src/collections/collections.repository.ts';
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

describe('collections', () => {
  it('creates with the default embedding model recorded and resolved', async () => {
    const response = await t.request('/api/v1/rag/collections', {
      method: 'POST',
      json: { name: 'papers', description: 'Research papers' },
    });
    expect(response.status).toBe(201);
    expect(await response.json()).toMatchObject({
      id: expect.stringMatching(/^col_/),
      name: 'papers',
      description: 'Research papers',
      embedding_model: 'text-embedding-ada-002',
      embedding_provider: 'local',
      embedding_model_resolved: 'sentence-transformers/all-MiniLM-L6-v2',
      dimensions: 384,
      document_count: 0,
      chunk_count: 0,
    });
  });

  it('exact errors: duplicate name 409, bad name 400, unknown 404, unknown model 400', async () => {
    await createCollection(t, 'dup');
    const dup = await t.request('/api/v1/rag/collections', { method: 'POST', json: { name: 'dup' } });
    expect(dup.status).toBe(409);
    expect(await dup.json()).toEqual({ error: 'Collection name already exists' });

    for (const name of ['', '-starts-with-dash', 'has space', 'x'.repeat(65), 'ünïcode']) {
      const bad = await t.request('/api/v1/rag/collections', { method: 'POST', json: { name } });
      expect(bad.status, name).toBe(400);
      expect(typeof ((await bad.json()) as { error: unknown }).error).toBe('string');
    }
    for (const path of ['/api/v1/rag/collections/nope', '/api/v1/rag/collections/nope/documents']) {
      const missing = await t.request(path);
      expect(missing.status).toBe(404);
      expect(await missing.json()).toEqual({ error: 'Collection not found' });
    }
    const put = await t.request('/api/v1/rag/collections/nope', { method: 'PUT', json: { description: 'x' } });
    expect(put.status).toBe(404);
    expect(await put.json()).toEqual({ error: 'Collection not found' });
    const del = await t.request('/api/v1/rag/collections/nope', { method: 'DELETE' });
    expect(await del.json()).toEqual({ error: 'Collection not found' });

    const model = await t.request('/api/v1/rag/collections', {
      method: 'POST',
      json: { name: 'm', embedding_model: 'no-such-model' },
    });
    expect(model.status).toBe(400);
    expect(await model.json()).toEqual({ error: "Unknown embedding model 'no-such-model'" });
  });

  it('lists, updates the description only, and counts processed documents and chunks', async () => {
    await createCollection(t, 'counted');
    const upload = await t.request('/api/v1/rag/collections/counted/documents', {
      method: 'POST',
      json: { name: 'a.txt', content: 'Alpha beta gamma. '.repeat(50) },
    });
    expect(upload.status).toBe(202);
    const doc = await waitForDocument(t, ((await upload.json()) as { id: string }).id);
    expect(doc.status).toBe('processed');

    const put = await t.request('/api/v1/rag/collections/counted', {
      method: 'PUT',
      json: { description: 'new', embedding_model: 'ignored' },
    });
    expect(put.status).toBe(200);
    expect(await put.json()).toEqual({ message: 'Collection updated' });
    const detail = (await (await t.request('/api/v1/rag/collections/counted')).json()) as Record<string, unknown>;
    expect(detail).toMatchObject({ description: 'new', document_count: 1, chunk_count: doc.chunk_count });
    const [truth] = await queryRows<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from chunks c join collections k on k.id = c.collection_id where k.name = 'counted'`,
    );
    expect(detail.chunk_count).toBe(truth?.n);

    const list = (await (await t.request('/api/v1/rag/collections')).json()) as { collections: { name: string }[] };
    expect(list.collections.map((c) => c.name)).toContain('counted');
  });

  it('delete: gone for every request at once, its documents, chunks and jobs purged after', async () => {
    const { id } = await createCollection(t, 'doomed');
    const upload = await t.request('/api/v1/rag/collections/doomed/documents', {
      method: 'POST',
      json: { name: 'd.txt', content: 'Delete me please. '.repeat(30) },
    });
    const docId = ((await upload.json()) as { id: string }).id;
    await waitForDocument(t, docId);
    const del = await t.request('/api/v1/rag/collections/doomed', { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect(await del.json()).toEqual({ message: 'Collection deleted' });
    expect((await t.request('/api/v1/rag/collections/doomed')).status).toBe(404);
    expect((await t.request(`/api/v1/rag/documents/${docId}`)).status).toBe(404);
    // The purger (woken by the delete) removes the rows, the collection's own last.
    await until('the deleted collection purged', async () => {
      const [left] = await queryRows<{ n: number }>(
        t.database.db,
        sql`select (select count(*) from chunks where collection_id = ${id})
               + (select count(*) from documents where collection_id = ${id})
               + (select count(*) from ingestion_jobs where document_id = ${docId})
               + (select count(*) from collections where id = ${id}) as n`,
      );
      return Number(left?.n) === 0;
    });
  });

  it('a key restricted to other collections sees them as missing', async () => {
    await createCollection(t, 'open');
    await createCollection(t, 'secret');
    const k = await t.createKey({ name: 'r', scopes: ['read', 'write', 'delete'], collections: ['open'] });
    const list = (await (await t.request('/api/v1/rag/collections', { key: k.key })).json()) as {
      collections: { name: string }[];
    };
    expect(list.collections.map((c) => c.name)).toEqual(['open']);
    for (const [method, path] of [
      ['GET', '/api/v1/rag/collections/secret'],
      ['PUT', '/api/v1/rag/collections/secret'],
      ['DELETE', '/api/v1/rag/collections/secret'],
      ['GET', '/api/v1/rag/collections/secret/documents'],
      ['POST', '/api/v1/rag/collections/secret/documents'],
    ] as const) {
      const json =
        method === 'PUT' ? { description: 'x' } : method === 'POST' ? { name: 'x.txt', content: 'x' } : undefined;
      const response = await t.request(path, { method, key: k.key, ...(json ? { json } : {}) });
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(await response.json()).toEqual({ error: 'Collection not found' });
    }
    expect((await t.request('/api/v1/rag/collections/open', { key: k.key })).status).toBe(200);
  });

  it('searches can use the collection HNSW index (EXPLAIN)', async () => {
    const { id, dimensions } = await createCollection(t, 'indexed');
    const vector = `[${Array.from({ length: dimensions }, (_, i) => (i === 0 ? 1 : 0)).join(',')}]`;
    const plan = await t.database.db.transaction(async (tx) => {
      await tx.execute(sql`set local enable_seqscan = off`);
      return queryRows<{ 'QUERY PLAN': string }>(
        tx,
        sql.raw(
          `explain select id from chunks where collection_id = '${id}' ` +
            `order by embedding::vector(${dimensions}) <=> '${vector}'::vector(${dimensions}) limit 5`,
        ),
      );
    });
    expect(plan.map((r) => r['QUERY PLAN']).join('\n')).toContain(`chunks_hnsw_${id}`);
  });

  it("counts a collection's documents and chunks from an index alone, never its documents' rows", async () => {
    const { id } = await createCollection(t, 'tallied');
    // 150 processed documents and 50 still pending, each carrying an original of 1.6 kB.
    await t.database.db.execute(sql`
      insert into documents (id, collection_id, name, content_type, format, size_bytes, sha256, original, status, chunk_count, processed_at)
      select 'doc_tallied' || i, ${id}, 'd' || i || '.txt', 'text/plain', 'txt', 1600, md5(i::text),
             decode(repeat(md5(i::text), 50), 'hex'), case when i <= 150 then 'processed' else 'pending' end,
             case when i <= 150 then i % 5 else 0 end, case when i <= 150 then now() end
      from generate_series(1, 200) i`);
    await t.database.db.execute(sql`vacuum analyze documents`);
    const r = await t.request('/api/v1/rag/collections/tallied');
    expect(r.status).toBe(200);
    // Σ i % 5 over 1..150: 30 of each remainder, 30 × (0 + 1 + 2 + 3 + 4).
    expect(await r.json()).toMatchObject({ document_count: 150, chunk_count: 300 });
    const plan = await t.database.db.transaction(async (tx) => {
      // As at scale: 200 rows are few enough for the planner to prefer reading their pages.
      await tx.execute(sql`set local enable_seqscan = off`);
      await tx.execute(sql`set local enable_bitmapscan = off`);
      return queryRows<{ 'QUERY PLAN': string }>(tx, sql`explain ${collectionCountsSql(sql`c.name = 'tallied'`)}`);
    });
    const text = plan.map((row) => row['QUERY PLAN']).join('\n');
    // Index-only: what the counts need is in documents_collection_processed_idx, so no document row is read.
    expect(text).toContain('Index Only Scan using documents_collection_processed_idx');
    expect(text).not.toMatch(/(Seq Scan|Bitmap Heap Scan|Index Scan using \S+) on documents/);
  });
});
