/**
 * How often the worker writes a document's progress: a short document goes from claimed to
 * processed with no intermediate write, and a long one is written at most every reportEveryMs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobsRepository, type JobsRepository } from '../../src/ingestion/jobs.repository.ts';
import type { IngestionWorker } from '../../src/ingestion/worker.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import { startTestWorker } from '../support/worker.ts';

const REPORT_EVERY_MS = 200;

let db: TestDatabase;
let t: TestApp;
let worker: IngestionWorker;
/** Each progress write: its document, stage and when it was asked for. */
const writes: { documentId: string; stage: string; at: number }[] = [];

beforeAll(async () => {
  db = await openTestDatabase();
  // No in-process worker: this test's own worker writes through a counting repository.
  t = await startTestApp({ database: db.database, config: { ingestionConcurrency: 0 } });
  await createCollection(t, 'progress_writes');
  const jobs = createJobsRepository(db.database.db);
  const counted: JobsRepository = {
    ...jobs,
    progress: (job, workerId, stage, counts) => {
      writes.push({ documentId: job.documentId, stage, at: performance.now() });
      return jobs.progress(job, workerId, stage, counts);
    },
  };
  worker = await startTestWorker(counted, { pollMs: 50, embedBatch: 2, reportEveryMs: REPORT_EVERY_MS });
}, 60_000);
afterAll(async () => {
  await worker.stop();
  await t.close();
  await db.close();
});

async function ingest(name: string, content: string) {
  const r = await t.request('/api/v1/rag/collections/progress_writes/documents', {
    method: 'POST',
    json: { name, content },
  });
  expect(r.status).toBe(202);
  const { id } = (await r.json()) as { id: string };
  return waitForDocument(t, id, undefined, 120_000);
}

describe('progress writes', () => {
  it('a short document is processed without an intermediate write', async () => {
    // The first job starts the parser process; a warm one parses a note in milliseconds.
    await ingest('warm-up.txt', 'A first note that starts the parser process.');
    const doc = await ingest('short.txt', 'A short note about tide tables and harbour pilots.');
    expect(doc.status).toBe('processed');
    expect(writes.filter((w) => w.documentId === doc.id)).toEqual([]);
  });

  it('a long document is written while it embeds, never twice within reportEveryMs', async () => {
    const paragraphs = Array.from(
      { length: 200 },
      (_, i) =>
        `Paragraph ${i}: lighthouse keepers logged the weather, trimmed the wicks and wound the clockwork ` +
        `that turned the lens; district ${i} kept its own records of storms, ships and supplies. `.repeat(3),
    );
    const doc = await ingest('long.txt', paragraphs.join('\n\n'));
    expect(doc.status).toBe('processed');
    const mine = writes.filter((w) => w.documentId === doc.id);
    expect(mine.length).toBeGreaterThanOrEqual(2);
    expect(mine.some((w) => w.stage === 'embedding')).toBe(true);
    for (let i = 1; i < mine.length; i++) {
      expect((mine[i] as { at: number }).at - (mine[i - 1] as { at: number }).at).toBeGreaterThanOrEqual(
        REPORT_EVERY_MS,
      );
    }
  }, 120_000);
});
