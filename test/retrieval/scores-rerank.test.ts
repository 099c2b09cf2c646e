import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

interface Hit {
  document_id: string;
  score: number;
  content: string;
  metadata: { document_name: string } & Record<string, unknown>;
  scores: { dense: number; keyword?: number; fused?: number; rerank?: number };
}

let t: TestApp;
let primary: MockUpstream;
let secondary: MockUpstream;
let key: { id: string; key: string };

const notes = [
  'Lighthouse keepers trimmed the wicks and wound the clockwork every night.',
  'The harbour pilot guides large ships past the sandbanks at high tide.',
  'A lighthouse lens focuses the lamp into a beam seen twenty miles out at sea.',
  'Sourdough bread rises slowly because wild yeast ferments the dough overnight.',
  'Tide tables predict high and low water for every port along the coast.',
  'Keepers logged the weather, the ships that passed and the oil they burned.',
  'Fog signals sounded when the beam of the lighthouse could not be seen.',
  'The bakery sells rye, spelt and sourdough loaves every morning.',
];

beforeAll(async () => {
  primary = await startMockUpstream({ models: ['mock-reranker'] });
  secondary = await startMockUpstream({ models: ['mock-reranker'], rerankFormat: 'cohere' });
  t = await startTestApp({
    gateway: {
      providers: [
        { name: 'primary', base_url: primary.url, models: [], rerank_models: ['mock-reranker'], max_retries: 0 },
        { name: 'secondary', base_url: secondary.url, models: [], rerank_models: ['mock-reranker'], priority: 1 },
      ],
      retry: { base_delay_ms: 1, max_delay_ms: 5 },
      circuit_breaker: { failure_threshold: 1_000 },
    },
  });
  key = await t.createKey({ name: 'searcher', scopes: ['tools'] });
  await createCollection(t, 'harbour');
  for (const [i, content] of notes.entries()) {
    const r = await t.request('/api/v1/rag/collections/harbour/documents', {
      method: 'POST',
      json: { name: `note${i}.txt`, content },
    });
    const { id } = (await r.json()) as { id: string };
    expect((await waitForDocument(t, id)).status).toBe('processed');
  }
}, 120_000);
afterAll(async () => {
  await t.close();
  await primary.close();
  await secondary.close();
});
beforeEach(() => {
  primary.reset();
  secondary.reset();
});

const search = (parameters: Record<string, unknown>) =>
  t.request('/api/v1/agent/tool-calling', {
    method: 'POST',
    key: key.key,
    json: { tool_name: 'rag_search', parameters: { collection: 'harbour', similarity_threshold: -1, ...parameters } },
  });
const hits = async (parameters: Record<string, unknown>) => {
  const r = await search(parameters);
  expect(r.status, await r.clone().text()).toBe(200);
  return ((await r.json()) as { results: Hit[] }).results;
};
const descending = (values: number[]) => values.every((v, i) => i === 0 || (values[i - 1] as number) >= v);
const names = (results: Hit[]) => results.map((h) => h.metadata.document_name);

describe('explained scores', () => {
  it('hybrid: the fused value, recomputable from the dense and keyword parts, orders the results; score is the cosine', async () => {
    const results = await hits({ query: 'lighthouse keepers at night', top_k: 20 });
    expect(results).toHaveLength(notes.length);
    expect(descending(results.map((h) => h.scores.fused ?? NaN))).toBe(true);
    // Every chunk is a candidate of the dense leg here, so each leg's best is among the results.
    const bestDense = Math.max(...results.map((h) => h.scores.dense));
    const bestKeyword = Math.max(...results.map((h) => h.scores.keyword ?? 0));
    const { dense: wDense, keyword: wKeyword } = t.config.retrieval.weights;
    for (const h of results) {
      // The contract's score: the cosine similarity, whatever ordered the results.
      expect(h.score).toBe(h.scores.dense);
      expect(h.scores.rerank).toBeUndefined();
      const expected =
        (wDense * Math.max(h.scores.dense, 0)) / bestDense + (wKeyword * (h.scores.keyword ?? NaN)) / bestKeyword;
      expect(h.scores.fused).toBeCloseTo(expected, 9);
    }
    // The top result is not simply the best cosine: fusion decided it, and scores.fused says so.
    expect(results[0]?.scores.keyword).toBe(bestKeyword);
  });

  it('single-leg modes rank by that leg; score is the cosine in both', async () => {
    const dense = await hits({ query: 'lighthouse keepers at night', mode: 'dense', top_k: 20 });
    expect(
      dense.every((h) => h.score === h.scores.dense && h.scores.keyword === undefined && !('fused' in h.scores)),
    ).toBe(true);
    expect(descending(dense.map((h) => h.score))).toBe(true);
    const keyword = await hits({ query: 'lighthouse keepers at night', mode: 'keyword', top_k: 20 });
    expect(keyword.length).toBeGreaterThan(1);
    expect(
      keyword.every((h) => h.score === h.scores.dense && (h.scores.keyword ?? 0) > 0 && !('fused' in h.scores)),
    ).toBe(true);
    expect(descending(keyword.map((h) => h.scores.keyword ?? NaN))).toBe(true);
  });

  it('fusion weights per request: all on one leg gives that leg’s order; out of bounds is a 400', async () => {
    const query = 'ships and tide';
    const denseOnly = await hits({ query, top_k: 20, weights: { dense: 1, keyword: 0 } });
    expect(names(denseOnly)).toEqual(names(await hits({ query, top_k: 20, mode: 'dense' })));
    const keywordOnly = await hits({ query, top_k: 3, weights: { dense: 0, keyword: 2 } });
    expect(names(keywordOnly)).toEqual(names(await hits({ query, top_k: 3, mode: 'keyword' })));
    expect(keywordOnly[0]?.scores.fused).toBeCloseTo(2, 9); // the best BM25 over itself, weighted 2

    for (const weights of [
      { dense: 11 },
      { keyword: -0.1 },
      { dense: 0, keyword: 0 },
      { dense: 'high' },
      { other: 1 },
      // Too small to weigh anything: the fused score underflowed in PostgreSQL, a 500.
      { dense: 5e-324 },
      { keyword: 1e-300 },
    ]) {
      const r = await search({ query, weights });
      expect(r.status, JSON.stringify(weights)).toBe(400);
      expect(((await r.json()) as { error: string }).error).toMatch(/weights/);
    }
    // The smallest weight that counts still does.
    expect(await hits({ query, top_k: 3, weights: { dense: 1e-6, keyword: 1 } })).not.toHaveLength(0);
  });

  it('similarity_threshold still applies to the cosine, whatever the score', async () => {
    const all = await hits({ query: 'sourdough bread', top_k: 20 });
    const threshold = ((all[1]?.scores.dense ?? 0) + (all[2]?.scores.dense ?? 0)) / 2;
    const kept = await hits({ query: 'sourdough bread', top_k: 20, similarity_threshold: threshold });
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.every((h) => h.scores.dense >= threshold)).toBe(true);
    expect(kept).toHaveLength(all.filter((h) => h.scores.dense >= threshold).length);
  });
});

describe('rag_search with rerank', () => {
  it('reranks the fused candidates upstream and keeps top_k, ordered by the rerank score', async () => {
    const query = 'lighthouse beam seen at sea';
    const fused = await hits({ query, top_k: 20 });
    const results = await hits({ query, top_k: 3, rerank: { model: 'mock-reranker', candidates: 6 } });
    // The upstream got the six best fused candidates' texts and was asked for three.
    const sent = primary.requests.find((r) => r.path === '/v1/rerank')?.body;
    expect(sent).toMatchObject({ model: 'mock-reranker', query, top_n: 3 });
    expect(sent?.documents).toEqual(fused.slice(0, 6).map((h) => h.content));
    expect(results).toHaveLength(3);
    for (const h of results) {
      expect(h.score).toBe(h.scores.dense);
      expect(h.scores.fused).toBe(fused.find((f) => f.content === h.content)?.scores.fused);
    }
    expect(descending(results.map((h) => h.scores.rerank ?? NaN))).toBe(true);
    // The mock's ranking (share of query words present), not the fused one, decided the order.
    const upstream = JSON.parse(primary.requests[0]?.sent ?? '{}') as { results: { index: number }[] };
    expect(results.map((h) => h.content)).toEqual(upstream.results.map((r) => fused[r.index]?.content));
    // The rerank tokens count against the searching key.
    expect(t.app.usage.tokensRecorded(key.id)).toBeGreaterThan(0);
  });

  it('fails over to the next rerank provider, and a model no provider serves is a 404', async () => {
    primary.inject({ kind: 'status', status: 503 });
    const results = await hits({ query: 'fog signals', top_k: 2, rerank: { model: 'mock-reranker', candidates: 4 } });
    expect(results).toHaveLength(2);
    expect(results.every((h) => typeof h.scores.rerank === 'number')).toBe(true);
    expect(primary.count('/v1/rerank')).toBe(1);
    expect(secondary.count('/v1/rerank')).toBe(1);

    const unknown = await search({ query: 'fog', rerank: { model: 'no-such-reranker' } });
    expect(unknown.status).toBe(404);
    // Even when nothing passes the threshold (it answered [] then), and before any upstream call.
    const before = primary.count('/v1/rerank') + secondary.count('/v1/rerank');
    const nothing = await search({ query: 'zzqx', similarity_threshold: 0.99, rerank: { model: 'no-such-reranker' } });
    expect(nothing.status).toBe(404);
    expect(await nothing.json()).toEqual({ error: "No provider serves the rerank model 'no-such-reranker'" });
    expect(primary.count('/v1/rerank') + secondary.count('/v1/rerank')).toBe(before);
    for (const rerank of [{ model: 'mock-reranker', candidates: 0 }, { model: '' }, { candidates: 10 }]) {
      const r = await search({ query: 'fog', rerank });
      expect(r.status, JSON.stringify(rerank)).toBe(400);
    }
  });
});
