import { afterAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { openPglite, queryRows } from '../../src/db/client.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { indexBookkeeping } from '../support/index-stats.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';

const texts = [
  'Photosynthesis converts light energy into chemical energy stored in glucose.',
  'The mitochondrion is the powerhouse of the cell, producing ATP through respiration.',
  'Insulin regulates blood glucose by promoting uptake into muscle and fat tissue.',
  'CRISPR-Cas9 edits genomes by cutting DNA at sequences matched by a guide RNA.',
  'Vaccines train the adaptive immune system to recognise a pathogen antigen.',
  'Antibiotic resistance spreads through horizontal gene transfer between bacteria.',
  'Neurons transmit signals across synapses using neurotransmitters such as dopamine.',
  'Telomeres shorten with each cell division, a hallmark of cellular ageing.',
];

async function ingest(t: TestApp, collection: string) {
  await createCollection(t, collection);
  // One document at a time, so every database embeds in identical batches.
  for (const [i, content] of texts.entries()) {
    const r = await t.request(`/api/v1/rag/collections/${collection}/documents`, {
      method: 'POST',
      json: { name: `t${i}.txt`, content },
    });
    await waitForDocument(t, ((await r.json()) as { id: string }).id);
  }
}

async function results(t: TestApp, collection: string, query: string, mode: string) {
  const r = await t.request('/api/v1/agent/tool-calling', {
    method: 'POST',
    json: { tool_name: 'rag_search', parameters: { query, collection, mode, top_k: 8, similarity_threshold: -1 } },
  });
  expect(r.status).toBe(200);
  return ((await r.json()) as { results: { metadata: { document_name: string }; score: number }[] }).results.map(
    (h) => ({
      name: h.metadata.document_name,
      score: h.score,
    }),
  );
}

const apps: TestApp[] = [];
afterAll(async () => {
  for (const app of apps) await app.close();
});

describe.skipIf(!process.env.TEST_DATABASE_URL)('PGlite and the PostgreSQL server', () => {
  it('give identical results for the same data', async () => {
    const server = await startTestApp({ config: { ingestionConcurrency: 1 } });
    apps.push(server);
    const pglite = await openPglite();
    await pglite.migrate();
    const embedded = await startTestApp({ database: pglite, config: { ingestionConcurrency: 1 } });
    apps.push(embedded);
    await ingest(server, 'same');
    await ingest(embedded, 'same');
    for (const query of ['How do cells make energy?', 'gene editing with guide RNA', 'dopamine']) {
      for (const mode of ['dense', 'keyword', 'hybrid']) {
        const a = await results(server, 'same', query, mode);
        const b = await results(embedded, 'same', query, mode);
        expect(
          b.map((h) => h.name),
          `${mode}: ${query}`,
        ).toEqual(a.map((h) => h.name));
        b.forEach((h, i) => expect(h.score).toBeCloseTo(a[i]?.score ?? NaN, 5));
      }
    }
    await pglite.close();
  }, 120_000);
});

describe('BM25 statistics under concurrent ingestion and deletion', () => {
  it('always equal the chunks that exist', async () => {
    const t = await startTestApp({ config: { ingestionConcurrency: 4 } });
    apps.push(t);
    await createCollection(t, 'busy');
    const ids = await Promise.all(
      Array.from({ length: 24 }, async (_, i) => {
        const r = await t.request('/api/v1/rag/collections/busy/documents', {
          method: 'POST',
          json: {
            name: `b${i}.txt`,
            content: `Document ${i}. ${'Concurrency keeps statistics honest. '.repeat(5 + i)}`,
          },
        });
        return ((await r.json()) as { id: string }).id;
      }),
    );
    // Delete some while others are still being processed.
    await Promise.all(
      ids.filter((_, i) => i % 3 === 0).map((id) => t.request(`/api/v1/rag/documents/${id}`, { method: 'DELETE' })),
    );
    for (const id of ids.filter((_, i) => i % 3 !== 0)) expect((await waitForDocument(t, id)).status).toBe('processed');
    const row = await indexBookkeeping(t.database.db, 'busy');
    expect(row.stats_chunks).toBe(row.chunks);
    expect(row.stats_terms).toBe(row.terms);
    expect(row.postings).toBe(row.terms);
    expect(row.chunks).toBe(row.expected);
    // Document frequencies match the postings term by term.
    expect(row.drift).toEqual([]);
    const [terms] = await queryRows<{ n: number }>(
      t.database.db,
      sql`select count(*)::int as n from term_stats where df > 0
          and collection_id = (select id from collections where name = 'busy')`,
    );
    expect(terms?.n).toBeGreaterThan(10);
  }, 120_000);
});
