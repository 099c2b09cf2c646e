import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

/**
 * Cohere's SDK sends `null` for an argument given as None (`co.rerank(..., top_n=None)`, as
 * wrappers passing their own optional setting do): it means the default, not a 400.
 */

let mock: MockUpstream;
let t: TestApp;
let key: string;

beforeAll(async () => {
  mock = await startMockUpstream({ models: ['rerank-v3.5'], rerankFormat: 'cohere' });
  t = await startTestApp({
    gateway: { providers: [{ name: 'cohere', base_url: mock.url, models: [], rerank_models: ['rerank-v3.5'] }] },
  });
  key = (await t.createKey({ name: 'rerank-null', scopes: ['embeddings'] })).key;
});
afterAll(async () => {
  await t.close();
  await mock.close();
});

interface RerankResponse {
  results: { index: number; document?: { text: string } }[];
}

const rerank = (json: Record<string, unknown>) =>
  t.request('/api/v1/rerank', {
    method: 'POST',
    key,
    json: { model: 'rerank-v3.5', query: 'capital city', documents: ['a capital city', 'a river', 'a city'], ...json },
  });

describe('POST /api/v1/rerank with null options', () => {
  it('top_n and return_documents as null: every document, each with its text', async () => {
    const response = await rerank({ top_n: null, return_documents: null });
    expect(response.status, await response.clone().text()).toBe(200);
    const body = (await response.json()) as RerankResponse;
    expect(body.results.map((r) => r.index)).toEqual([0, 2, 1]);
    expect(body.results[0]?.document).toEqual({ text: 'a capital city' });
  });

  it('return_documents false still leaves them out, and a top_n of 0 is still a 400', async () => {
    const without = (await (await rerank({ return_documents: false })).json()) as RerankResponse;
    expect(without.results.every((r) => r.document === undefined)).toBe(true);
    const zero = await rerank({ top_n: 0 });
    expect(zero.status).toBe(400);
    expect(await zero.json()).toMatchObject({ error: { param: 'top_n', code: 'invalid_value' } });
  });
});
