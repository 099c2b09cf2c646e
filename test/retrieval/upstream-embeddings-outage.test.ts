import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { waitForDocument } from '../support/documents.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

// An upstream embedding provider that fails long enough for its circuit breaker to open: the
// ingestion queue waits for the breaker's cool-down before the next attempt instead of spending the
// document's attempts on a breaker that refuses them without reaching the provider.

const COOLDOWN_MS = 4_000;
let t: TestApp;
let provider: MockUpstream;

beforeAll(async () => {
  provider = await startMockUpstream({ models: ['mock-embed'], embeddingDimensions: 32, embeddingKind: 'words' });
  t = await startTestApp({
    gateway: {
      providers: [{ name: 'solo', base_url: provider.url, models: [], embedding_models: ['mock-embed'] }],
      retry: { max_retries: 0, base_delay_ms: 1, max_delay_ms: 5 },
      circuit_breaker: { failure_threshold: 2, cooldown_ms: COOLDOWN_MS },
    },
  });
  const created = await t.request('/api/v1/rag/collections', {
    method: 'POST',
    json: { name: 'outage', embedding_model: 'mock-embed' },
  });
  expect(created.status).toBe(201);
}, 60_000);
afterAll(async () => {
  await t.close();
  await provider.close();
});

/** Uploads into the collection and waits until the document is processed or failed. */
async function ingest(name: string, content: string) {
  const r = await t.request('/api/v1/rag/collections/outage/documents', { method: 'POST', json: { name, content } });
  expect(r.status).toBe(202);
  return waitForDocument(t, ((await r.json()) as { id: string }).id, undefined, 30_000);
}

describe('an upstream embedding provider whose breaker opens while a document ingests', () => {
  it('the next attempt waits for the cool-down, reaches the recovered provider, and the document is processed', async () => {
    provider.reset();
    // Two failed calls (one per attempt, no retries configured) open the breaker.
    provider.inject({ kind: 'status', status: 503 }, 2);
    const started = Date.now();
    const doc = await ingest('blip.txt', 'Written while the embedding provider had a short outage.');
    expect(doc.status, doc.error ?? '').toBe('processed');
    // The third attempt came after the breaker's cool-down (the job's own backoff is 1–2 s there).
    expect(Date.now() - started).toBeGreaterThanOrEqual(COOLDOWN_MS);
    expect(provider.count('/v1/embeddings')).toBe(3);
    const [job] = await queryRows<{ attempts: number; status: string; last_error: string }>(
      t.database.db,
      sql`select attempts, status, last_error from ingestion_jobs where document_id = ${doc.id}`,
    );
    expect(job).toMatchObject({ attempts: 3, status: 'done' });
  }, 60_000);

  it('a provider that stays down: the document fails with the reason, after waiting for the cool-downs', async () => {
    provider.reset();
    provider.inject({ kind: 'status', status: 503 }, 100);
    const started = Date.now();
    const doc = await ingest('down.txt', 'Written while the embedding provider was down for good.');
    expect(doc.status).toBe('failed');
    expect(doc.error).toBe("Embedding model 'mock-embed': Provider solo answered HTTP 503");
    // Attempt 1 and 2 reach the provider and open its breaker; attempt 3 is the trial after the
    // cool-down, not a refusal one second later.
    expect(provider.count('/v1/embeddings')).toBe(3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(COOLDOWN_MS);
  }, 60_000);

  it('while every breaker is open, a search is a 502 that says so and when to come back', async () => {
    provider.reset();
    provider.inject({ kind: 'status', status: 503 }, 100);
    const search = () =>
      t.request('/api/v1/agent/tool-calling', {
        method: 'POST',
        json: { tool_name: 'rag_search', parameters: { collection: 'outage', query: 'outage' } },
      });
    // The failing document above may have left the breaker half-open; two failures open it.
    for (let i = 0; i < 2; i++) await search();
    const refused = await search();
    expect(refused.status).toBe(502);
    expect(((await refused.json()) as { error: string }).error).toMatch(
      /^Embedding model 'mock-embed': No provider for model mock-embed is available right now: each one failed repeatedly and is paused \(circuit breaker open\)$/,
    );
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(COOLDOWN_MS / 1000);
  });
});
