/**
 * A collection deleted while its documents upload and are indexed. On a PostgreSQL server the
 * DELETE (collection row, then the running jobs) and the index writes (job row, then the
 * collection row through foreign keys) locked in opposite orders: deadlocks, and DELETEs that lost
 * all their retries answered 500 with the collection left in place.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ config: { ingestionConcurrency: 4 } });
});
afterAll(async () => {
  await t.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('deleting a collection while its documents are indexed', () => {
  it('every DELETE succeeds, uploads racing it get 404, nothing answers 5xx, no job of a deleted collection is left', async () => {
    const name = 'churned';
    const rounds = 10;
    const statuses = { delete: [] as number[], create: [] as number[], upload: [] as number[], search: [] as number[] };
    let stop = false;
    let n = 0;
    const uploader = async () => {
      while (!stop) {
        const i = ++n;
        const content = `Document ${i}. ${'The quick brown fox jumps over the lazy dog. '.repeat(1 + (i % 20))}zq${i}x`;
        const response = await t.request(`/api/v1/rag/collections/${name}/documents`, {
          method: 'POST',
          json: { name: `d${i}.txt`, content },
        });
        statuses.upload.push(response.status);
        await response.arrayBuffer();
      }
    };
    const searcher = async () => {
      while (!stop) {
        const response = await t.request('/api/v1/agent/tool-calling', {
          method: 'POST',
          json: { tool_name: 'rag_search', parameters: { collection: name, query: 'quick brown fox', top_k: 20 } },
        });
        statuses.search.push(response.status);
        await response.arrayBuffer();
      }
    };
    const churner = async () => {
      for (let round = 0; round < rounds; round++) {
        statuses.create.push((await t.request('/api/v1/rag/collections', { method: 'POST', json: { name } })).status);
        // Long enough for documents to be claimed and their chunks committed meanwhile.
        await sleep(300 + (round % 4) * 250);
        statuses.delete.push((await t.request(`/api/v1/rag/collections/${name}`, { method: 'DELETE' })).status);
      }
      stop = true;
    };
    await Promise.all([churner(), ...[1, 2, 3, 4, 5].map(uploader), ...[1, 2, 3].map(searcher)]);

    expect(statuses.delete).toEqual(Array(rounds).fill(200));
    expect(statuses.create).toEqual(Array(rounds).fill(201));
    expect(statuses.search.filter((s) => s !== 200 && s !== 404)).toEqual([]);
    // Not even retried: a deadlock between a DELETE and an index write is not in the log.
    expect(t.rawLogs()).not.toContain('deadlock detected');
    expect(statuses.upload.filter((s) => s !== 202 && s !== 404)).toEqual([]);
    expect(statuses.upload.filter((s) => s === 202).length).toBeGreaterThan(rounds);
    // Each DELETE cancelled its collection's unfinished jobs: none is left to run.
    const [left] = await queryRows<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from ingestion_jobs j
          join documents d on d.id = j.document_id join collections c on c.id = d.collection_id
          where c.deleted_at is not null and j.status in ('queued', 'running')`,
    );
    expect(left?.n).toBe(0);
  }, 120_000);
});
