import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { createJobsRepository } from '../../src/ingestion/jobs.repository.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import { sharedJsonLines } from '../support/fixtures.ts';
import { startTestWorker } from '../support/worker.ts';

const duplicates = async (t: TestApp) =>
  (
    await queryRows<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from (select document_id, position from chunks group by 1, 2 having count(*) > 1) d`,
    )
  )[0]?.n;

describe('a worker that dies mid-job', () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await openTestDatabase();
    // No in-process worker: the test plays the crashed worker and then starts a real one.
    t = await startTestApp({ database: db.database, config: { ingestionConcurrency: 0 } });
    await createCollection(t, 'crash');
  });
  afterAll(async () => {
    await t.close();
    await db.close();
  });

  it('its job is taken over after the lease expires; the document ends processed with no duplicate chunks', async () => {
    const response = await t.request('/api/v1/rag/collections/crash/documents', {
      method: 'POST',
      json: { name: 'c.txt', content: 'Crash recovery matters. '.repeat(200) },
    });
    const { id } = (await response.json()) as { id: string };
    const jobs = createJobsRepository(db.database.db);

    // The "dead" worker claimed the job with a short lease and left stray rows behind.
    const claimed = await jobs.claim('wrk_dead', 300);
    expect(claimed?.documentId).toBe(id);
    await db.database.db.execute(sql`
      insert into chunks (document_id, collection_id, position, start_char, end_char, token_count, content, model, embedding)
      select ${id}, collection_id, 0, 0, 1, 1, 'stray', 'x', array_fill(0.1, array[384])::vector
      from documents where id = ${id}`);
    expect(((await (await t.request(`/api/v1/rag/documents/${id}`)).json()) as { status: string }).status).toBe(
      'processing',
    );

    const worker = await startTestWorker(jobs, { leaseMs: 2_000, pollMs: 100 });
    try {
      const doc = await waitForDocument(t, id);
      expect(doc.status).toBe('processed');
      const [counts] = await queryRows<{ n: number; stray: number }>(
        t.database.db,
        sql`select count(*)::int as n, count(*) filter (where content = 'stray')::int as stray from chunks where document_id = ${id}`,
      );
      expect(counts).toEqual({ n: doc.chunk_count, stray: 0 });
      expect(await duplicates(t)).toBe(0);
      // The dead worker coming back cannot write a second set of chunks.
      expect(await jobs.complete(claimed!, 'wrk_dead', 'x', [])).toBe(false);
      expect(
        ((await (await t.request(`/api/v1/rag/documents/${id}`)).json()) as { chunk_count: number }).chunk_count,
      ).toBe(doc.chunk_count);
    } finally {
      await worker.stop();
    }
  });

  it('a job whose workers keep dying ends failed with a readable error, never stuck processing', async () => {
    const response = await t.request('/api/v1/rag/collections/crash/documents', {
      method: 'POST',
      json: { name: 'doomed.txt', content: 'Never finished.' },
    });
    const { id } = (await response.json()) as { id: string };
    const jobs = createJobsRepository(db.database.db);
    for (let i = 0; i < 3; i++) {
      let claimed = await jobs.claim(`wrk_dead${i}`, 50);
      for (let tries = 0; claimed === undefined && tries < 50; tries++) {
        await new Promise((r) => setTimeout(r, 20));
        claimed = await jobs.claim(`wrk_dead${i}`, 50);
      }
      expect(claimed?.attempts).toBe(i + 1);
      await new Promise((r) => setTimeout(r, 60));
    }
    expect(await jobs.reapExhausted()).toBe(1);
    const doc = (await (await t.request(`/api/v1/rag/documents/${id}`)).json()) as { status: string; error: string };
    expect(doc.status).toBe('failed');
    expect(doc.error).toBe('Processing was interrupted 3 times (a worker stopped or timed out)');
  });
});

const serverUrl = process.env.TEST_DATABASE_URL;

describe.skipIf(!serverUrl)('worker processes on a PostgreSQL server', () => {
  let db: TestDatabase;
  let t: TestApp;
  const children: ChildProcess[] = [];
  const workerScript = path.resolve(import.meta.dirname, '../../src/worker.ts');

  const startWorker = () => {
    const child = spawn(process.execPath, [workerScript], {
      env: {
        ...process.env,
        DATABASE_URL: db.url,
        INGESTION_LEASE_MS: '2000',
        LOG_LEVEL: 'warn',
        INGESTION_CONCURRENCY: '1',
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(child);
    return child;
  };

  beforeAll(async () => {
    db = await openTestDatabase();
    t = await startTestApp({ database: db.database, config: { ingestionConcurrency: 0 } });
    await createCollection(t, 'scifact');
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await t.close();
    await db.close();
  });

  it('kill -9 mid-ingestion, then two workers share the rest: every document processed once, no duplicates', async () => {
    const corpus = sharedJsonLines<{ _id: string; title: string; text: string }>('scifact/corpus.jsonl').slice(0, 60);
    const ids: string[] = [];
    for (const doc of corpus) {
      const r = await t.request('/api/v1/rag/collections/scifact/documents', {
        method: 'POST',
        json: { name: `${doc._id}.txt`, content: `${doc.title}\n\n${doc.text}` },
      });
      expect(r.status).toBe(202);
      ids.push(((await r.json()) as { id: string }).id);
    }
    const first = startWorker();
    // Wait until the first worker is in the middle of the queue, then kill it without warning.
    for (let i = 0; i < 600; i++) {
      const [row] = await queryRows<{ done: number }>(
        t.database.db,
        sql`select count(*) filter (where status = 'processed')::int as done from documents`,
      );
      if ((row?.done ?? 0) >= 5) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    first.kill('SIGKILL');
    startWorker();
    startWorker();
    for (const id of ids) expect((await waitForDocument(t, id, undefined, 120_000)).status).toBe('processed');
    expect(await duplicates(t)).toBe(0);
    const [row] = await queryRows<{ chunks: number; counted: number; jobs: number }>(
      t.database.db,
      sql`select (select count(*) from chunks)::int as chunks,
                 (select sum(chunk_count) from documents)::int as counted,
                 (select count(*) from ingestion_jobs where status <> 'done')::int as jobs`,
    );
    expect(row?.chunks).toBe(row?.counted);
    expect(row?.jobs).toBe(0);
  }, 240_000);
});
