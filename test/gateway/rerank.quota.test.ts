import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

// quota.tokens_per_month holds on /rerank (both paths) as on chat (docs/gateway.md): refused with
// 403 quota_exceeded before any upstream call once the key's tokens this month reach the quota.
let jina: MockUpstream;
let t: TestApp;
beforeAll(async () => {
  jina = await startMockUpstream({ models: ['jina-reranker-v2'], rerankFormat: 'jina' });
  t = await startTestApp({
    gateway: { providers: [{ name: 'jina', base_url: jina.url, models: [], rerank_models: ['jina-reranker-v2'] }] },
  });
});
afterAll(async () => {
  await t.close();
  await jina.close();
});
beforeEach(() => {
  jina.reset();
});

const query = 'capital of the United States';
const documents = ['Washington, D.C. is the capital of the United States.', 'Carson City is in Nevada.'];
const rerank = (key: string, path = '/api/v1/rerank', model = 'jina-reranker-v2') =>
  t.request(path, { method: 'POST', key, json: { model, query, documents } });
const quotaKey = (tokensPerMonth: number) =>
  t.createKey({ name: `quota-${tokensPerMonth}`, scopes: ['embeddings'], quota: { tokens_per_month: tokensPerMonth } });

describe('/rerank and the monthly token quota', () => {
  it('served under the quota; once it is reached, 403 quota_exceeded on both paths with no upstream call', async () => {
    const k = await quotaKey(5);
    const served = await rerank(k.key);
    expect(served.status).toBe(200);
    const used = ((await served.json()) as { usage: { total_tokens: number } }).usage.total_tokens;
    expect(used).toBeGreaterThanOrEqual(5);
    const expected = {
      error: {
        message: `Monthly token quota of this API key exceeded (${used} of 5)`,
        type: 'permission_error',
        code: 'quota_exceeded',
      },
    };
    for (const path of ['/api/v1/rerank', '/api/v2/rerank']) {
      const refused = await rerank(k.key, path);
      expect(refused.status, path).toBe(403);
      expect(await refused.json()).toEqual(expected);
    }
    expect(jina.count('/v1/rerank')).toBe(1);
    // The same quota as every model call: the key's embeddings are refused too.
    const embedding = await t.request('/api/v1/embeddings', {
      method: 'POST',
      key: k.key,
      json: { model: 'text-embedding-ada-002', input: 'x' },
    });
    expect(embedding.status).toBe(403);
    expect(await embedding.json()).toEqual(expected);
  });

  it('a key under its quota, or without one, is served; an unknown model is still a 404 first', async () => {
    const roomy = await quotaKey(1_000_000);
    for (const path of ['/api/v1/rerank', '/api/v2/rerank']) {
      expect((await rerank(roomy.key, path)).status, path).toBe(200);
    }
    const free = await t.createKey({ name: 'free', scopes: ['embeddings'] });
    expect((await rerank(free.key)).status).toBe(200);

    const spent = await quotaKey(1);
    expect((await rerank(spent.key)).status).toBe(200);
    const unknown = await rerank(spent.key, '/api/v1/rerank', 'no-such-reranker');
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('model_not_found');
  });
});
