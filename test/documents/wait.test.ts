import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres } from '../../src/db/client.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection } from '../support/documents.ts';

// `?wait=true`: answers at the transition to processed, failed or cancelled, through one LISTEN
// per process (a trigger announces the change), on PGlite and across instances on the server.

let t: TestApp;
/** No ingestion worker on its database: its documents stay pending until cancelled. */
let idle: TestApp;

const text = (name: string) => ({ name, content: `Wait until searchable: ${name} about lighthouse keepers.` });

beforeAll(async () => {
  t = await startTestApp();
  await createCollection(t, 'kb');
  idle = await startTestApp({ config: { ingestionConcurrency: 0 } });
  await createCollection(idle, 'parked');
}, 120_000);
afterAll(async () => {
  await idle.close();
  await t.close();
});

const timed = async <T>(f: () => Promise<T>) => {
  const started = Date.now();
  const value = await f();
  return { value, ms: Date.now() - started };
};

describe('wait=true', () => {
  it('an upload answers 200 once processed, and is searchable at once', async () => {
    const r = await t.request('/api/v1/rag/collections/kb/documents?wait=true', {
      method: 'POST',
      json: text('a.txt'),
    });
    expect(r.status).toBe(200);
    const doc = (await r.json()) as { id: string; status: string; chunk_count: number };
    expect(doc.status).toBe('processed');
    expect(doc.chunk_count).toBeGreaterThan(0);
    const search = await t.request('/api/v1/agent/tool-calling', {
      method: 'POST',
      json: { tool_name: 'rag_search', parameters: { collection: 'kb', query: 'lighthouse keepers', mode: 'keyword' } },
    });
    const hits = ((await search.json()) as { results: { document_id: string }[] }).results;
    expect(hits.map((h) => h.document_id)).toContain(doc.id);
  });

  it('GET answers at the transition: a pending document cancelled meanwhile', async () => {
    const up = await idle.request('/api/v1/rag/collections/parked/documents', { method: 'POST', json: text('b.txt') });
    const { id } = (await up.json()) as { id: string };
    const waiting = timed(() => idle.request(`/api/v1/rag/documents/${id}?wait=true&timeout=20`));
    await new Promise((r) => setTimeout(r, 300));
    const cancel = await idle.request(`/api/v1/rag/documents/${id}/cancel`, { method: 'POST' });
    expect(cancel.status).toBe(200);
    const { value: r, ms } = await waiting;
    expect(r.status).toBe(200);
    expect(((await r.json()) as { status: string }).status).toBe('cancelled');
    expect(ms).toBeLessThan(10_000);
  });

  it('times out cleanly with the state then: 202 for an upload, 200 for GET', async () => {
    const { value: up, ms } = await timed(() =>
      idle.request('/api/v1/rag/collections/parked/documents?wait=true&timeout=1', {
        method: 'POST',
        json: text('c.txt'),
      }),
    );
    expect(up.status).toBe(202);
    const doc = (await up.json()) as { id: string; status: string };
    expect(doc.status).toBe('pending');
    expect(ms).toBeGreaterThanOrEqual(900);
    const { value: got, ms: getMs } = await timed(() =>
      idle.request(`/api/v1/rag/documents/${doc.id}?wait=true&timeout=1`),
    );
    expect(got.status).toBe(200);
    expect(((await got.json()) as { status: string }).status).toBe('pending');
    expect(getMs).toBeGreaterThanOrEqual(900);
  });

  it('a document deleted while waited for is a 404', async () => {
    const up = await idle.request('/api/v1/rag/collections/parked/documents', { method: 'POST', json: text('d.txt') });
    const { id } = (await up.json()) as { id: string };
    const waiting = idle.request(`/api/v1/rag/documents/${id}?wait=true&timeout=20`);
    await new Promise((r) => setTimeout(r, 300));
    expect((await idle.request(`/api/v1/rag/documents/${id}`, { method: 'DELETE' })).status).toBeLessThan(300);
    expect((await waiting).status).toBe(404);
  });

  it('bounds the timeout and refuses a bad wait value', async () => {
    for (const q of ['wait=true&timeout=0', 'wait=true&timeout=301', 'wait=yes']) {
      const r = await t.request(`/api/v1/rag/documents/doc_x?${q}`);
      expect(r.status, q).toBe(400);
    }
  });

  it.runIf(Boolean(process.env.TEST_DATABASE_URL))(
    'across instances: a waiter on one instance hears a change made through another',
    async () => {
      expect(idle.databaseUrl).toBeDefined();
      const other = openPostgres({ url: idle.databaseUrl as string, poolSize: 2 });
      const b = await startTestApp({ database: other, config: { ingestionConcurrency: 0, adminKey: idle.adminKey } });
      try {
        const up = await idle.request('/api/v1/rag/collections/parked/documents', {
          method: 'POST',
          json: text('e.txt'),
        });
        const { id } = (await up.json()) as { id: string };
        const waiting = timed(() => b.request(`/api/v1/rag/documents/${id}?wait=true&timeout=20`));
        await new Promise((r) => setTimeout(r, 300));
        expect((await idle.request(`/api/v1/rag/documents/${id}/cancel`, { method: 'POST' })).status).toBe(200);
        const { value: r, ms } = await waiting;
        expect(((await r.json()) as { status: string }).status).toBe('cancelled');
        expect(ms).toBeLessThan(10_000);
      } finally {
        await b.close();
        await other.close();
      }
    },
  );
});
