import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { createJobsRepository, type ClaimedJob, type EmbeddedChunk } from '../../src/ingestion/jobs.repository.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import { expectConsistentIndex } from '../support/index-stats.ts';
import { foundContents } from '../support/search.ts';
import { embeddedChunks } from '../support/embeddings.ts';
import { sharedJsonLines } from '../support/fixtures.ts';

/**
 * A document of more chunks than one transaction takes is written a slice per transaction
 * (src/ingestion/jobs.repository.ts): searches must not see a version until its last slice is in,
 * and must keep seeing the version it replaces meanwhile.
 */
const abstracts = sharedJsonLines<{ title: string; text: string }>('scifact/corpus.jsonl').slice(0, 40);
const worker = 'wrk_slices';
// Two chunks per transaction, from the first: a twelve-chunk document takes six.
const slicing = { singleMax: 2, firstSlice: 2, sliceMs: 1e9, maxSlice: 2 };

/** An AbortSignal as the commit loop reads it: aborted from the `slices`-th check on. */
const stopAfter = (slices: number) => {
  let checks = 0;
  return {
    get aborted() {
      return checks++ >= slices;
    },
  } as AbortSignal;
};

describe('a large document committed in slices', () => {
  let db: TestDatabase;
  let t: TestApp;
  const jobs = (s = slicing) => createJobsRepository(db.database.db, { slicing: s });

  beforeAll(async () => {
    db = await openTestDatabase();
    // No worker in the app: the test commits the jobs itself, and stops between slices.
    t = await startTestApp({ database: db.database, config: { ingestionConcurrency: 0 } });
    await createCollection(t, 'slices');
  });
  afterAll(async () => {
    await t.close();
    await db.close();
  });

  /** The job's content as the worker would commit it: one chunk per text, embedded by the real model. */
  async function chunksOf(job: ClaimedJob, texts: string[]): Promise<EmbeddedChunk[]> {
    const doc = await jobs().document(job);
    return embeddedChunks(
      { provider: doc!.embeddingProvider, model: doc!.embeddingModel, dimensions: doc!.dimensions },
      texts,
      100,
    );
  }

  async function claim(): Promise<ClaimedJob> {
    const job = await jobs().claim(worker, 60_000);
    if (!job) throw new Error('no job to claim');
    return job;
  }

  const found = (query: string) => foundContents(t, 'slices', query);

  /** The keyword statistics against the chunks and postings that exist, and what is left staged. */
  const bookkeeping = () => expectConsistentIndex(t.database.db, 'slices');

  const upload = async (name: string) => {
    const r = await t.request('/api/v1/rag/collections/slices/documents', {
      method: 'POST',
      json: { name, content: `${name}: placeholder content, replaced by the test's own chunks.` },
    });
    expect(r.status).toBe(202);
    return ((await r.json()) as { id: string }).id;
  };

  /** A new upload claimed, its chunks embedded and `slices` slices written: then the attempt stops. */
  async function stoppedAfter(name: string, texts: string[], slices: number) {
    const id = await upload(name);
    const before = await bookkeeping();
    const job = await claim();
    const chunks = await chunksOf(job, texts);
    expect(await jobs().complete(job, worker, 'm', chunks, stopAfter(slices))).toBe(false);
    return { id, before, job, chunks };
  }

  it('a first upload is invisible until its last slice, then whole; a replace shows the old version until then', async () => {
    const id = await upload('big.txt');
    const v1 = abstracts.slice(0, 12).map((a) => a.text);
    const v2 = abstracts.slice(20, 27).map((a) => a.text);

    // Half of the first version written, then the attempt stops.
    let job = await claim();
    const first = await chunksOf(job, v1);
    expect(await jobs().complete(job, worker, 'm', first, stopAfter(3))).toBe(false);
    const [staged] = await queryRows<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from chunks where document_id = ${id}`,
    );
    expect(staged?.n).toBe(6);
    expect(await found(v1[0] as string)).toEqual(new Set());
    expect(((await (await t.request(`/api/v1/rag/documents/${id}`)).json()) as { status: string }).status).toBe(
      'processing',
    );

    // The same attempt goes on to the end: the half written before is dropped, not doubled.
    expect(await jobs().complete(job, worker, 'm', first)).toBe('done');
    let doc = await waitForDocument(t, id);
    expect(doc).toMatchObject({ status: 'processed', chunk_count: 12 });
    for (const query of [v1[0], v1[11]] as string[]) {
      const hits = await found(query);
      expect(hits.size).toBeGreaterThan(0);
      for (const content of hits) expect(v1).toContain(content);
    }
    expect(await bookkeeping()).toMatchObject({ chunks: 12, expected: 12, staged: 0 });

    // A replace: part of the new version written, searches still see the old one alone.
    const put = await t.request(`/api/v1/rag/documents/${id}`, {
      method: 'PUT',
      json: { name: 'big-v2.txt', content: 'The second version, replaced by the test’s own chunks.' },
    });
    expect(put.status).toBe(202);
    job = await claim();
    const second = await chunksOf(job, v2);
    expect(await jobs().complete(job, worker, 'm', second, stopAfter(2))).toBe(false);
    for (const query of [v2[0], v2[3], v1[0]] as string[]) {
      const hits = await found(query);
      expect(hits.size).toBeGreaterThan(0);
      for (const content of hits) expect(v1).toContain(content);
    }
    doc = (await (await t.request(`/api/v1/rag/documents/${id}`)).json()) as typeof doc;
    expect(doc).toMatchObject({ chunk_count: 12, version: 1 });

    // Published: the new version alone, the old one gone from the index and the statistics.
    expect(await jobs().complete(job, worker, 'm', second)).toBe('done');
    doc = await waitForDocument(t, id);
    expect(doc).toMatchObject({ status: 'processed', chunk_count: 7, version: 2, name: 'big-v2.txt' });
    for (const query of [v2[0], v2[6], v1[0]] as string[]) {
      const hits = await found(query);
      expect(hits.size).toBeGreaterThan(0);
      for (const content of hits) expect(v2).toContain(content);
    }
    expect(await bookkeeping()).toMatchObject({ chunks: 7, expected: 7, staged: 0 });
  }, 120_000);

  it('slices that change size write every chunk once', async () => {
    const id = await upload('sizes.txt');
    const job = await claim();
    const chunks = await chunksOf(
      job,
      abstracts.slice(0, 10).map((a) => a.text),
    );
    // A first slice of one chunk, then three at a time (the size follows the time a slice took).
    const growing = { singleMax: 1, firstSlice: 1, sliceMs: 1e9, maxSlice: 3 };
    expect(await jobs(growing).complete(job, worker, 'm', chunks)).toBe('done');
    const rows = await queryRows<{ position: number }>(
      t.database.db,
      sql`select position from chunks where document_id = ${id} order by position`,
    );
    expect(rows.map((r) => r.position)).toEqual([...Array(10).keys()]);
    await t.request(`/api/v1/rag/documents/${id}`, { method: 'DELETE' });
  }, 120_000);

  it('an attempt stopped before its first slice leaves nothing hidden behind for a one-transaction retry', async () => {
    const id = await upload('retried.txt');
    const job = await claim();
    const texts = abstracts.slice(12, 16).map((a) => a.text);
    expect(await jobs().complete(job, worker, 'm', await chunksOf(job, texts), stopAfter(0))).toBe(false);
    // The retry's content fits one transaction (at most `singleMax` chunks).
    expect(await jobs().complete(job, worker, 'm', await chunksOf(job, texts.slice(0, 2)))).toBe('done');
    const hits = await found(texts[0] as string);
    expect(hits).toContain(texts[0]);
    expect(await bookkeeping()).toMatchObject({ staged: 0 });
    await t.request(`/api/v1/rag/documents/${id}`, { method: 'DELETE' });
  }, 120_000);

  it('a failed attempt takes its unfinished version out of the index and the statistics', async () => {
    const { id, before, job } = await stoppedAfter(
      'fails.txt',
      abstracts.slice(30, 36).map((a) => a.text),
      2,
    );
    expect((await bookkeeping()).chunks).toBe(before.chunks + 4);

    await jobs().fail(job, worker, 'upstream went away', null);
    expect((await waitForDocument(t, id)).status).toBe('failed');
    expect(await bookkeeping()).toMatchObject({ chunks: before.chunks, staged: 0 });
    expect(await found(abstracts[30]!.text)).not.toContain(abstracts[30]!.text);
  }, 120_000);

  it('a document deleted between two slices: the rest is not written, nothing is left behind', async () => {
    const { id, before, job, chunks } = await stoppedAfter(
      'deleted.txt',
      abstracts.slice(36, 40).map((a) => a.text),
      1,
    );
    expect((await t.request(`/api/v1/rag/documents/${id}`, { method: 'DELETE' })).status).toBe(200);
    expect(await jobs().complete(job, worker, 'm', chunks)).toBe(false);
    expect(await bookkeeping()).toMatchObject({ chunks: before.chunks, staged: 0 });
  }, 120_000);
});

describe('the worker, with the default slicing', () => {
  it('ingests a document of dozens of chunks: processed, searchable, nothing left staged', async () => {
    const t = await startTestApp({ config: { ingestionConcurrency: 1 } });
    try {
      await createCollection(t, 'long');
      const content = abstracts.map((a) => `${a.title}\n\n${a.text}`).join('\n\n');
      const r = await t.request('/api/v1/rag/collections/long/documents', {
        method: 'POST',
        json: { name: 'long.md', content },
      });
      const doc = await waitForDocument(t, ((await r.json()) as { id: string }).id);
      expect(doc.status).toBe('processed');
      expect(doc.chunk_count).toBeGreaterThan(20);
      const [counts] = await queryRows<{ chunks: number; staged: number }>(
        t.database.db,
        sql`select (select count(*) from chunks where document_id = ${doc.id})::int as chunks,
                   (select count(*) from chunk_staging)::int as staged`,
      );
      expect(counts).toEqual({ chunks: doc.chunk_count, staged: 0 });
      const hits = await t.request('/api/v1/agent/tool-calling', {
        method: 'POST',
        json: {
          tool_name: 'rag_search',
          parameters: { query: abstracts[39]!.title, collection: 'long', top_k: 3, similarity_threshold: -1 },
        },
      });
      expect(((await hits.json()) as { results: { content: string }[] }).results[0]?.content).toContain(
        abstracts[39]!.text.slice(0, 40),
      );
    } finally {
      await t.close();
    }
  }, 120_000);
});
