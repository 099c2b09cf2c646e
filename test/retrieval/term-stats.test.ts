import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { RETIRE_ABOVE } from '../../src/retrieval/index.repository.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import { sharedJsonLines } from '../support/fixtures.ts';
import { expectConsistentIndex } from '../support/index-stats.ts';

/**
 * The keyword statistics keep a row per term a collection's chunks hold, and no more: a term whose
 * last chunk goes (a document deleted or replaced) leaves the table with it. Left behind at df 0,
 * such rows grew it with every order number, id and name a collection ever saw.
 */
const abstracts = sharedJsonLines<{ title: string; text: string }>('scifact/corpus.jsonl');

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  await createCollection(t, 'churn');
});
afterAll(async () => {
  await t.close();
});

async function upload(name: string, content: string) {
  const r = await t.request('/api/v1/rag/collections/churn/documents', { method: 'POST', json: { name, content } });
  expect(r.status).toBe(202);
  const doc = await waitForDocument(t, ((await r.json()) as { id: string }).id, undefined, 120_000);
  expect(doc.status).toBe('processed');
  return doc;
}

async function replace(id: string, name: string, content: string) {
  const r = await t.request(`/api/v1/rag/documents/${id}`, { method: 'PUT', json: { name, content } });
  expect(r.status).toBe(202);
  const doc = await waitForDocument(t, id, undefined, 120_000);
  expect(doc.status).toBe('processed');
  return doc;
}

/** The document frequency recorded for each term (lower-case, unstemmed words), null when absent. */
async function dfOf(...terms: string[]): Promise<Record<string, number | null>> {
  const rows = await queryRows<{ term: string; df: number }>(
    t.database.db,
    sql`select term, df from term_stats
        where collection_id = (select id from collections where name = 'churn') and term = any(${sql.param(terms)}::text[])`,
  );
  return Object.fromEntries(terms.map((term) => [term, rows.find((r) => r.term === term)?.df ?? null]));
}

const emptyRows = async () =>
  (
    await queryRows<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from term_stats
          where collection_id = (select id from collections where name = 'churn') and df <= 0`,
    )
  )[0]?.n;

describe('keyword statistics under churn', () => {
  it('a deleted document takes its own terms with it and lowers the shared ones', async () => {
    const a = await upload('a.txt', 'Order zq7alpha shipped to the warehouse.');
    await upload('b.txt', 'Order zq7beta shipped to the warehouse.');
    expect(await dfOf('zq7alpha', 'zq7beta', 'warehous')).toEqual({ zq7alpha: 1, zq7beta: 1, warehous: 2 });

    expect((await t.request(`/api/v1/rag/documents/${a.id}`, { method: 'DELETE' })).status).toBe(200);
    expect(await dfOf('zq7alpha', 'zq7beta', 'warehous')).toEqual({ zq7alpha: null, zq7beta: 1, warehous: 1 });
    expect(await emptyRows()).toBe(0);
    await expectConsistentIndex(t.database.db, 'churn');
  }, 180_000);

  it('a replaced document keeps only the terms of its new version', async () => {
    const c = await upload('c.txt', 'Ticket zq7gamma was closed by the night shift.');
    await replace(c.id, 'c.txt', 'Ticket zq7delta was closed by the night shift.');
    expect(await dfOf('zq7gamma', 'zq7delta', 'ticket')).toEqual({ zq7gamma: null, zq7delta: 1, ticket: 1 });
    expect(await emptyRows()).toBe(0);
    await expectConsistentIndex(t.database.db, 'churn');
  }, 180_000);

  it('a version of many chunks, removed in slices after a replace, and a large delete leave no empty rows', async () => {
    const many = (from: number, count: number) =>
      abstracts
        .slice(from, from + count)
        .map((a) => `## ${a.title}\n\n${a.text}`)
        .join('\n\n');
    const large = await upload('large.md', many(300, 70));
    expect(large.chunk_count).toBeGreaterThan(RETIRE_ABOVE);
    await replace(large.id, 'large.md', many(400, 70));
    // The retired version goes after the replace commits; wait for its last slice.
    const deadline = Date.now() + 60_000;
    while ((await retired()) > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(await retired()).toBe(0);
    expect(await emptyRows()).toBe(0);
    await expectConsistentIndex(t.database.db, 'churn');

    expect((await t.request(`/api/v1/rag/documents/${large.id}`, { method: 'DELETE' })).status).toBe(200);
    expect(await emptyRows()).toBe(0);
    await expectConsistentIndex(t.database.db, 'churn');
  }, 300_000);
});

const retired = async () =>
  (
    await queryRows<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from chunk_retired r join collections k on k.id = r.collection_id
          where k.name = 'churn'`,
    )
  )[0]?.n ?? 0;
