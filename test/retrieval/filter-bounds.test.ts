import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';

// Issue 13, finding 1: a `$in` list of 32,800 values (one bind parameter each) overflowed the
// driver's 16-bit parameter count; on PGlite the database stayed broken until restart.

let t: TestApp;

const search = (parameters: Record<string, unknown>) =>
  t.request('/api/v1/agent/tool-calling', {
    method: 'POST',
    json: { tool_name: 'rag_search', parameters: { collection: 'kb', query: 'felines', ...parameters } },
  });

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

beforeAll(async () => {
  t = await startTestApp();
  await createCollection(t, 'kb');
  for (const [name, team] of [
    ['cats.txt', 7],
    ['dogs.txt', 999],
  ] as const) {
    const r = await t.request('/api/v1/rag/collections/kb/documents', {
      method: 'POST',
      json: {
        name,
        content: `Cats and dogs are small domesticated felines and canines (${name}).`,
        metadata: { team },
      },
    });
    expect(r.status).toBe(202);
    const { id } = (await r.json()) as { id: string };
    expect((await waitForDocument(t, id)).status).toBe('processed');
  }
}, 120_000);
afterAll(async () => {
  await t.close();
});

/** Every part of the service that touches the database still works. */
async function stillHealthy() {
  const { key } = await t.createKey({ name: 'after', scopes: ['read', 'tools'] });
  const listed = await t.request('/api/v1/rag/collections', { key });
  expect(listed.status).toBe(200);
  expect(JSON.stringify(await listed.json())).toContain('kb');
  const created = await t.request('/api/v1/rag/collections', { method: 'POST', json: { name: `c${Date.now()}` } });
  expect(created.status).toBe(201);
  const ok = await search({ filters: { team: { $in: [7] } } });
  expect(ok.status).toBe(200);
  expect(((await ok.json()) as { results: unknown[] }).results.length).toBeGreaterThan(0);
  const ready = await t.request('/readyz', { key: null });
  expect(ready.status).toBe(200);
}

describe('filter bounds', () => {
  for (const n of [32_800, 70_000]) {
    it(`a $in list of ${n} values is a 400 naming the limit, and the database is unharmed`, async () => {
      const r = await search({ filters: { team: { $in: range(n) } } });
      expect(r.status).toBe(400);
      const body = (await r.json()) as { detail?: string; message?: string; error?: { message: string } };
      expect(JSON.stringify(body)).toMatch(/\$in.*at most 1,?000 values/);
      await stillHealthy();
    });
  }

  it('$nin is bounded the same way', async () => {
    const r = await search({ filters: { team: { $nin: range(1_001) } } });
    expect(r.status).toBe(400);
    expect(JSON.stringify(await r.json())).toMatch(/\$nin.*at most 1,?000 values/);
  });

  it('the largest allowed list filters correctly, bound as one parameter', async () => {
    const r = await search({ filters: { team: { $in: range(1_000) } } });
    expect(r.status).toBe(200);
    const names = ((await r.json()) as { results: { metadata: { document_name: string } }[] }).results.map(
      (h) => h.metadata.document_name,
    );
    expect(names.sort()).toEqual(['cats.txt', 'dogs.txt']);
    const nin = await search({ filters: { team: { $nin: range(1_000).filter((v) => v !== 7) } } });
    const ninNames = ((await nin.json()) as { results: { metadata: { document_name: string } }[] }).results.map(
      (h) => h.metadata.document_name,
    );
    expect(ninNames).toEqual(['cats.txt']);
  });

  it('filter size, depth and condition count are bounded', async () => {
    const big = await search({ filters: { team: { $in: range(900).map((i) => `${'x'.repeat(80)}${i}`) } } });
    expect(big.status).toBe(400);
    expect(await big.json()).toEqual({ error: 'parameters.filters: 77,308 bytes (at most 65,536)' });

    let deep: unknown = 1;
    for (let i = 0; i < 40; i++) deep = { a: deep };
    const nested = await search({ filters: { team: deep } });
    expect(nested.status).toBe(400);
    expect(JSON.stringify(await nested.json())).toMatch(/nested deeper than 8 levels/);

    const path = await search({ filters: { [Array.from({ length: 20 }, () => 'a').join('.')]: 1 } });
    expect(path.status).toBe(400);
    expect(JSON.stringify(await path.json())).toMatch(/at most 8 path segments/);

    const many = Object.fromEntries(range(51).map((i) => [`k${i}`, 1]));
    const tooMany = await search({ filters: many });
    expect(tooMany.status).toBe(400);
    expect(await tooMany.json()).toEqual({ error: 'parameters.filters: too many keys (at most 50, got 51)' });
  });

  it('a logged error never carries the whole filter', async () => {
    const before = t.rawLogs().length;
    await search({ filters: { team: { $in: range(70_000) } } });
    const written = t.rawLogs().slice(before);
    for (const line of written.split('\n')) expect(line.length).toBeLessThanOrEqual(16_384);
  });
});
