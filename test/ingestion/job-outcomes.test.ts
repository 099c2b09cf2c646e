/**
 * How a job a worker was processing ended, as `ragport_ingestion_jobs_total{outcome}` counts it:
 * a cancel or a deletion is `cancelled` or `deleted`, never `abandoned` (which says a worker lost
 * its lease or stopped: what an operator alerts on). The heartbeat, which often notices first,
 * said `abandoned` for all of them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobsRepository } from '../../src/ingestion/jobs.repository.ts';
import type { IngestionWorker, JobOutcome } from '../../src/ingestion/worker.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';
import { createCollection } from '../support/documents.ts';
import { until } from '../support/poll.ts';
import { startTestWorker } from '../support/worker.ts';

let db: TestDatabase;
let t: TestApp;
let worker: IngestionWorker;
const outcomes: { documentId: string; outcome: JobOutcome }[] = [];
let current: string | undefined;

beforeAll(async () => {
  db = await openTestDatabase();
  t = await startTestApp({ database: db.database, config: { ingestionConcurrency: 0 } });
  const jobs = createJobsRepository(db.database.db);
  // A heartbeat every 100 ms, progress written only at the start: the heartbeat is what sees the
  // job end, as it mostly is with a real lease and a long embedding batch.
  worker = await startTestWorker(
    {
      ...jobs,
      claim: async (...args) => {
        const claimed = await jobs.claim(...args);
        if (claimed !== undefined) current = claimed.documentId;
        return claimed;
      },
    },
    {
      pollMs: 50,
      embedBatch: 2,
      leaseMs: 300,
      reportEveryMs: 600_000,
      metrics: { jobEnded: (outcome) => outcomes.push({ documentId: current ?? '', outcome }) },
    },
  );
}, 60_000);
afterAll(async () => {
  await worker.stop();
  await t.close();
  await db.close();
});

/** A document of about `paragraphs` chunks, uploaded to `collection`; its id once a worker is on it. */
async function processing(collection: string, paragraphs: number) {
  const content = Array.from(
    { length: paragraphs },
    (_, i) => `Paragraph ${i}: the keeper of light ${i} wound the clockwork and logged gales, ships and supplies. `,
  )
    .map((p) => p.repeat(8))
    .join('\n\n');
  const r = await t.request(`/api/v1/rag/collections/${collection}/documents`, {
    method: 'POST',
    json: { name: `${collection}.txt`, content },
  });
  expect(r.status).toBe(202);
  const { id } = (await r.json()) as { id: string };
  await until('the worker on it', () => current === id);
  // Well into embedding: a few heartbeats later.
  await new Promise((resolve) => setTimeout(resolve, 400));
  return id;
}

const outcomeOf = (id: string) =>
  until(`the job of ${id} ended`, () => outcomes.find((o) => o.documentId === id)?.outcome);

describe('a job ended while a worker processes it', () => {
  it('cancelled: counted as cancelled', async () => {
    await createCollection(t, 'outcome_cancel');
    const id = await processing('outcome_cancel', 60);
    expect((await t.request(`/api/v1/rag/documents/${id}/cancel`, { method: 'POST' })).status).toBe(200);
    expect(await outcomeOf(id)).toBe('cancelled');
  }, 60_000);

  it('its document deleted: counted as deleted', async () => {
    await createCollection(t, 'outcome_delete');
    const id = await processing('outcome_delete', 60);
    expect((await t.request(`/api/v1/rag/documents/${id}`, { method: 'DELETE' })).status).toBe(200);
    expect(await outcomeOf(id)).toBe('deleted');
  }, 60_000);

  it('its collection deleted: cancelled, or deleted once the purger took its document', async () => {
    await createCollection(t, 'outcome_collection');
    const id = await processing('outcome_collection', 60);
    expect((await t.request('/api/v1/rag/collections/outcome_collection', { method: 'DELETE' })).status).toBe(200);
    expect(['cancelled', 'deleted']).toContain(await outcomeOf(id));
  }, 60_000);
});
