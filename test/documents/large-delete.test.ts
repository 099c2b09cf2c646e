import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { createCollectionPurger } from '../../src/collections/purge.ts';
import { createDocumentsRepository, DOCUMENT_REMOVAL } from '../../src/documents/documents.repository.ts';
import { createLogger } from '../../src/logging.ts';
import { createIndexRepository, RETIRE_ABOVE } from '../../src/retrieval/index.repository.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import { sharedJsonLines } from '../support/fixtures.ts';
import { embeddedChunks } from '../support/embeddings.ts';
import { until } from '../support/poll.ts';
import { expectConsistentIndex } from '../support/index-stats.ts';
import { foundContents } from '../support/search.ts';

/**
 * A document of many chunks is deleted in short transactions (src/documents/documents.repository.ts
 * `delete`): its chunks hidden from searches at once, removed a slice at a time, the row last; a
 * deletion interrupted half-way is finished by the purger.
 */
const abstracts = sharedJsonLines<{ title: string; text: string }>('scifact/corpus.jsonl');

let t: TestApp;
let collectionId: string;
beforeAll(async () => {
  t = await startTestApp();
  collectionId = (await createCollection(t, 'big')).id;
});
afterAll(async () => {
  await t.close();
});

async function upload(name: string, from: number, count: number) {
  const content = abstracts
    .slice(from, from + count)
    .map((a) => `## ${a.title}\n\n${a.text}`)
    .join('\n\n');
  const r = await t.request('/api/v1/rag/collections/big/documents', { method: 'POST', json: { name, content } });
  expect(r.status).toBe(202);
  const doc = await waitForDocument(t, ((await r.json()) as { id: string }).id, undefined, 120_000);
  expect(doc.status).toBe('processed');
  return doc;
}

const found = (query: string) => foundContents(t, 'big', query);
const consistent = () => expectConsistentIndex(t.database.db, 'big');

const chunksOf = async (documentId: string) =>
  (
    await queryRows<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from chunks where document_id = ${documentId}`,
    )
  )[0]?.n;

describe('deleting a document of many chunks', () => {
  it('through the API: gone, with its chunks, postings and statistics, the rest untouched', async () => {
    const kept = await upload('kept.md', 0, 5);
    // More chunks than one transaction removes.
    const large = await upload('large.md', 100, 70);
    expect(large.chunk_count).toBeGreaterThan(DOCUMENT_REMOVAL.above);
    const del = await t.request(`/api/v1/rag/documents/${large.id}`, { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect((await t.request(`/api/v1/rag/documents/${large.id}`)).status).toBe(404);
    expect(await chunksOf(large.id)).toBe(0);
    expect(await consistent()).toMatchObject({ chunks: kept.chunk_count, staged: 0 });
    // The other document is still found.
    const hits = await found(abstracts[2]!.title);
    expect([...hits].some((c) => c.includes(abstracts[2]!.text.slice(0, 40)))).toBe(true);
  }, 180_000);

  it('in slices: hidden from every search at once, and finished by the purger after an interruption', async () => {
    const doomed = await upload('doomed.md', 200, 12);
    const before = await found(abstracts[205]!.title);
    expect([...before].some((c) => c.includes(abstracts[205]!.text.slice(0, 40)))).toBe(true);

    // What `delete` commits first for a large document, and what a crash right after leaves.
    await t.database.db.transaction((tx) =>
      createIndexRepository(t.database.db).hideDocument(doomed.id, collectionId, tx),
    );
    const hidden = await found(abstracts[205]!.title);
    expect([...hidden].some((c) => c.includes(abstracts[205]!.text.slice(0, 40)))).toBe(false);
    expect((await t.request(`/api/v1/rag/documents/${doomed.id}`)).status).toBe(200);

    // Two chunks a transaction, from a purger as after a restart.
    const slices = { above: 0, sliceMs: 60_000, firstRows: 2, maxRows: 2 };
    const repo = createDocumentsRepository(t.database.db, slices);
    const [staged] = await queryRows<{ first_chunk_id: string }>(
      t.database.db,
      sql`select first_chunk_id::text from chunk_staging where document_id = ${doomed.id}`,
    );
    expect(staged?.first_chunk_id).toBe('0');
    expect(await repo.hiddenForRemoval()).toEqual({ documentId: doomed.id, collectionId });
    const purger = createCollectionPurger({ db: t.database.db, logger: createLogger('silent') });
    expect(await purger.runOnce()).toBe(1);
    expect((await t.request(`/api/v1/rag/documents/${doomed.id}`)).status).toBe(404);
    expect(await chunksOf(doomed.id)).toBe(0);
    expect((await consistent()).staged).toBe(0);
    expect(await purger.runOnce()).toBe(0);
  }, 180_000);

  it('removeHidden removes a slice per transaction and stops when the document is not hidden whole', async () => {
    const doc = await upload('sliced.md', 300, 10);
    const n = await chunksOf(doc.id);
    const index = createIndexRepository(t.database.db);
    // Not hidden: nothing removed.
    expect(await t.database.db.transaction((tx) => index.removeHiddenSlice(doc.id, collectionId, 3, tx))).toBe(0);
    await t.database.db.transaction((tx) => index.hideDocument(doc.id, collectionId, tx));
    expect(await t.database.db.transaction((tx) => index.removeHiddenSlice(doc.id, collectionId, 3, tx))).toBe(3);
    expect(await chunksOf(doc.id)).toBe((n as number) - 3);
    // The statistics follow each slice.
    await consistent();
    // A replace beginning a new version takes the record over: the slices stop.
    await t.database.db.execute(sql`update chunk_staging set first_chunk_id = 1 where document_id = ${doc.id}`);
    expect(await t.database.db.transaction((tx) => index.removeHiddenSlice(doc.id, collectionId, 3, tx))).toBe(0);
    // The deletion then removes what is left with the row.
    const repo = createDocumentsRepository(t.database.db, { above: 0, sliceMs: 60_000, firstRows: 2, maxRows: 2 });
    await repo.removeHidden(doc.id, collectionId);
    expect(await chunksOf(doc.id)).toBe(0);
    expect((await consistent()).staged).toBe(0);
  }, 180_000);
});

describe('replacing a document of many chunks', () => {
  const retiredRows = async () =>
    (await queryRows<{ n: number }>(t.database.db, sql`select count(*)::int as n from chunk_retired`))[0]?.n;

  it('through the API: the new version at once, the old one removed after, the statistics exact', async () => {
    const doc = await upload('handbook.md', 400, 70);
    expect(doc.chunk_count).toBeGreaterThan(RETIRE_ABOVE);
    const oldText = abstracts[420]!.text.slice(0, 40);
    expect([...(await found(abstracts[420]!.title))].some((c) => c.includes(oldText))).toBe(true);
    const content = abstracts
      .slice(500, 570)
      .map((a) => `## ${a.title}\n\n${a.text}`)
      .join('\n\n');
    const put = await t.request(`/api/v1/rag/documents/${doc.id}`, {
      method: 'PUT',
      json: { name: 'handbook.md', content },
    });
    expect(put.status).toBe(202);
    const replaced = await waitForDocument(t, doc.id, undefined, 120_000);
    expect(replaced).toMatchObject({ status: 'processed', version: 2 });
    // Searches never see the old version again, whether or not its chunks are gone yet.
    expect([...(await found(abstracts[420]!.title))].some((c) => c.includes(oldText))).toBe(false);
    expect([...(await found(abstracts[520]!.title))].some((c) => c.includes(abstracts[520]!.text.slice(0, 40)))).toBe(
      true,
    );
    await until('the old version removed', async () => (await retiredRows()) === 0);
    expect(await chunksOf(doc.id)).toBe(replaced.chunk_count);
    await consistent();
  }, 180_000);

  it('a retired version is hidden at once, and the purger finishes its removal after an interruption', async () => {
    const doc = await upload('retire.md', 600, 8);
    const before = await chunksOf(doc.id);
    const oldText = abstracts[603]!.text.slice(0, 40);
    // A replace committed by a repository that retires any old set of more than 2 chunks, and
    // nothing removing it after: what a worker stopped right after its commit leaves.
    const local = { provider: 'local', model: 'sentence-transformers/all-MiniLM-L6-v2', dimensions: 384 };
    const texts = [
      'Gannets dive from thirty metres into the sea.',
      'Puffins carry several fish crosswise in their bills.',
    ];
    const chunks = await embeddedChunks(local, texts, 12);
    const index = createIndexRepository(t.database.db, { retireAbove: 2 });
    expect(await index.replaceDocument(doc.id, collectionId, local.model, chunks)).toEqual({ retired: true });
    expect(await retiredRows()).toBe(1);
    expect(await chunksOf(doc.id)).toBe((before as number) + 2);
    const now = await found('gannets dive into the sea');
    expect(now).toContain(texts[0]);
    expect([...(await found(abstracts[603]!.title))].some((c) => c.includes(oldText))).toBe(false);

    const purger = createCollectionPurger({ db: t.database.db, logger: createLogger('silent') });
    expect(await purger.runOnce()).toBe(1);
    expect(await retiredRows()).toBe(0);
    expect(await chunksOf(doc.id)).toBe(2);
    expect(await found('gannets dive into the sea')).toContain(texts[0]);
    await consistent();
  }, 180_000);
});
