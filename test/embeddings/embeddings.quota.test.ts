import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { startAppOnUpstreamEmbeddings, type TestApp } from '../support/app.ts';
import type { MockUpstream } from '../support/mock-upstream.ts';

// quota.tokens_per_month holds on /embeddings as on chat (docs/gateway.md): checked before the
// model runs, once the tokens this month reach the quota; local and upstream models alike.
let upstream: MockUpstream;
let t: TestApp;
let close: () => Promise<void>;
beforeAll(async () => {
  ({ t, upstream, close } = await startAppOnUpstreamEmbeddings('up', 'mock-embed', 4));
});
afterAll(() => close());
beforeEach(() => {
  upstream.reset();
});

const embed = (key: string, model: string, input: string | string[]) =>
  t.request('/api/v1/embeddings', { method: 'POST', key, json: { model, input } });
const quotaKey = (tokensPerMonth: number) =>
  t.createKey({ name: `quota-${tokensPerMonth}`, scopes: ['embeddings'], quota: { tokens_per_month: tokensPerMonth } });
const exceeded = (used: number, limit: number) => ({
  error: {
    message: `Monthly token quota of this API key exceeded (${used} of ${limit})`,
    type: 'permission_error',
    code: 'quota_exceeded',
  },
});

describe('POST /api/v1/embeddings and the monthly token quota', () => {
  it('a local model: served under the quota, 403 quota_exceeded once it is reached', async () => {
    const k = await quotaKey(5);
    // "The quick brown fox": 4 tokens for the local model.
    expect((await embed(k.key, 'text-embedding-ada-002', 'The quick brown fox')).status).toBe(200);
    expect((await embed(k.key, 'text-embedding-ada-002', 'The quick brown fox')).status).toBe(200); // 4 < 5
    const refused = await embed(k.key, 'text-embedding-ada-002', 'The quick brown fox');
    expect(refused.status).toBe(403);
    expect(await refused.json()).toEqual(exceeded(8, 5));
    // Refused calls cost nothing, and the refusal holds once the counts reach the database.
    await t.app.usage.flush();
    const usage = (await (await t.request(`/api/v1/keys/${k.id}/usage`)).json()) as {
      quota: { tokens_per_month: { used: number; limit: number } };
    };
    expect(usage.quota.tokens_per_month).toMatchObject({ used: 8, limit: 5 });
    expect((await embed(k.key, 'sentence-transformers/all-MiniLM-L6-v2', 'x')).status).toBe(403);
  });

  it('an upstream model: refused before any upstream call once the quota is reached', async () => {
    const k = await quotaKey(3);
    expect((await embed(k.key, 'mock-embed', ['one two', 'three'])).status).toBe(200); // 3 tokens upstream
    // (The first use of the model also measured its dimensions upstream.)
    const before = upstream.count('/v1/embeddings');
    const refused = await embed(k.key, 'mock-embed', 'four');
    expect(refused.status).toBe(403);
    expect(await refused.json()).toEqual(exceeded(3, 3));
    expect(upstream.count('/v1/embeddings')).toBe(before);
  });

  it('calls at once are held to the quota too: each reserves its input while it runs', async () => {
    // Before, ten concurrent calls of ~200 tokens all ran for a quota of 100 (2,000 tokens used).
    const k = await quotaKey(100);
    const input = 'word '.repeat(200).trim();
    const statuses = await Promise.all(
      Array.from({ length: 10 }, async () => (await embed(k.key, 'text-embedding-ada-002', input)).status),
    );
    expect(statuses.filter((status) => status === 200)).toHaveLength(1);
    expect(statuses.filter((status) => status === 403)).toHaveLength(9);
  });

  it('counts usage already in the database, of any model (chat here), from earlier processes', async () => {
    const k = await quotaKey(10);
    const day = new Date().toISOString().slice(0, 10);
    await t.database.db.execute(
      sql`insert into usage_daily (key_id, day, model, requests, prompt_tokens, completion_tokens) values (${k.id}, ${day}, 'mock-chat', 1, 6, 4)`,
    );
    const refused = await embed(k.key, 'text-embedding-ada-002', 'a');
    expect(refused.status).toBe(403);
    expect(await refused.json()).toEqual(exceeded(10, 10));
  });

  it('a key under its quota, or without one, is served; an unknown model is still a 404 first', async () => {
    const roomy = await quotaKey(1_000_000);
    for (const model of ['text-embedding-ada-002', 'mock-embed']) {
      expect((await embed(roomy.key, model, 'plenty of room')).status, model).toBe(200);
    }
    const free = await t.createKey({ name: 'free', scopes: ['embeddings'] });
    expect((await embed(free.key, 'text-embedding-ada-002', 'no quota')).status).toBe(200);

    const spent = await quotaKey(1);
    expect((await embed(spent.key, 'text-embedding-ada-002', 'spent')).status).toBe(200);
    const unknown = await embed(spent.key, 'no-such-model', 'x');
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('model_not_found');
  });
});
