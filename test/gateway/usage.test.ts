import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { countTextTokens } from '../../src/gateway/tokens.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

let mock: MockUpstream;
let t: TestApp;
const gateway = (url: string) => ({
  providers: [{ name: 'mock', base_url: url, models: ['mock-chat', 'mock-two'] }],
  retry: { max_retries: 0 },
});

beforeAll(async () => {
  mock = await startMockUpstream({ models: ['mock-chat', 'mock-two'], completionTokens: 4 });
  // A long interval: only explicit flushes (and close) write, so the tests control when.
  t = await startTestApp({ gateway: gateway(mock.url), config: { usageFlushIntervalMs: 3_600_000 } });
});
afterAll(async () => {
  await t.close();
  await mock.close();
});

const chat = (key: string, model: string, content: string, stream = false) =>
  t.request('/api/v1/chat/completions', {
    method: 'POST',
    key,
    json: { model, messages: [{ role: 'user', content }], stream },
  });

interface DailyRow {
  key_id: string;
  model: string;
  requests: number;
  prompt_tokens: string | number;
  completion_tokens: string | number;
}
const rows = (database: TestApp['database'], keyId: string) =>
  queryRows<DailyRow>(
    database.db,
    sql`select key_id, model, requests, prompt_tokens, completion_tokens from usage_daily where key_id = ${keyId} order by model`,
  );

describe('usage accounting', () => {
  it('counts requests and tokens per key, model and day, written in one batch, shown by the key usage route', async () => {
    const k = await t.createKey({ name: 'counted', scopes: ['chat'] });
    expect((await chat(k.key, 'mock-chat', 'a b c')).status).toBe(200);
    expect((await chat(k.key, 'mock-chat', 'a b')).status).toBe(200);
    await (await chat(k.key, 'mock-two', 'a', true)).text();
    expect(await rows(t.database, k.id)).toEqual([]);

    await t.app.usage.flush();
    expect(
      (await rows(t.database, k.id)).map((r) => [
        r.model,
        r.requests,
        Number(r.prompt_tokens),
        Number(r.completion_tokens),
      ]),
    ).toEqual([
      ['mock-chat', 2, 5, 8],
      ['mock-two', 1, 1, 4],
    ]);

    const usage = (await (await t.request(`/api/v1/keys/${k.id}/usage`)).json()) as {
      quota: { tokens_per_month: { used: number } };
      daily: Record<string, unknown>[];
    };
    expect(usage.quota.tokens_per_month.used).toBe(18);
    expect(usage.daily).toEqual([
      {
        day: expect.any(String),
        model: 'mock-chat',
        requests: 2,
        prompt_tokens: 5,
        completion_tokens: 8,
        total_tokens: 13,
      },
      {
        day: expect.any(String),
        model: 'mock-two',
        requests: 1,
        prompt_tokens: 1,
        completion_tokens: 4,
        total_tokens: 5,
      },
    ]);

    // Later flushes add to the same rows.
    await chat(k.key, 'mock-chat', 'z');
    await t.app.usage.flush();
    expect((await rows(t.database, k.id))[0]).toMatchObject({ requests: 3 });
  });

  it('counts with the tokenizer when the upstream reports no usage', async () => {
    const k = await t.createKey({ name: 'tokenized', scopes: ['chat'] });
    mock.options.usage = false;
    try {
      const body = (await (await chat(k.key, 'mock-chat', 'hello world')).json()) as Record<string, unknown>;
      expect(body.usage).toBeUndefined();
    } finally {
      mock.options.usage = true;
    }
    await t.app.usage.flush();
    const [row] = await rows(t.database, k.id);
    // user + "hello world" (2) + 3 per message + 3 priming; the completion as o200k counts it.
    expect(Number(row?.prompt_tokens)).toBe(9);
    expect(Number(row?.completion_tokens)).toBe(await countTextTokens(['w0 w1 w2 w3 ']));
  });

  it('refuses with 403 quota_exceeded once tokens_per_month is used, before calling the upstream', async () => {
    const k = await t.createKey({ name: 'quota', scopes: ['chat'], quota: { tokens_per_month: 10 } });
    expect((await chat(k.key, 'mock-chat', 'a b c d e')).status).toBe(200); // 5 + 4 = 9 tokens
    expect((await chat(k.key, 'mock-chat', 'a')).status).toBe(200); // 9 < 10 still allowed: now 14
    const before = mock.count('/v1/chat/completions');
    const refused = await chat(k.key, 'mock-chat', 'a');
    expect(refused.status).toBe(403);
    expect(await refused.json()).toEqual({
      error: {
        message: 'Monthly token quota of this API key exceeded (14 of 10)',
        type: 'permission_error',
        code: 'quota_exceeded',
      },
    });
    const stream = await chat(k.key, 'mock-chat', 'a', true);
    expect(stream.status).toBe(403);
    expect(mock.count('/v1/chat/completions')).toBe(before);
    // Still refused after the counts reach the database.
    await t.app.usage.flush();
    expect((await chat(k.key, 'mock-chat', 'a')).status).toBe(403);
  });

  it('the quota counts usage already in the database from earlier processes', async () => {
    const k = await t.createKey({ name: 'history', scopes: ['chat'], quota: { tokens_per_month: 100 } });
    const day = new Date().toISOString().slice(0, 10);
    await t.database.db.execute(
      sql`insert into usage_daily (key_id, day, model, requests, prompt_tokens, completion_tokens) values (${k.id}, ${day}, 'old', 1, 60, 40)`,
    );
    expect((await chat(k.key, 'mock-chat', 'a')).status).toBe(403);
  });

  it("calls in flight reserve the key's mean call size: concurrent calls do not run far past the quota", async () => {
    const k = await t.createKey({ name: 'concurrent', scopes: ['chat'], quota: { tokens_per_month: 100 } });
    expect((await chat(k.key, 'mock-chat', 'a')).status).toBe(200); // 1 + 4 = 5 tokens: the mean call
    mock.options.latencyMs = 300;
    try {
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, i) => chat(k.key, 'mock-chat', 'a', i % 2 === 0)),
      );
      const served = answers.filter((r) => r.status === 200);
      const refused = answers.filter((r) => r.status !== 200);
      for (const r of refused) {
        expect(r.status).toBe(403);
        expect(((await r.json()) as { error: { code: string } }).error.code).toBe('quota_exceeded');
      }
      await Promise.all(served.map((r) => r.text()));
      // 5 used, then 19 calls of 5 reach 100: every call admitted at once used to run (40, 205 tokens).
      expect(served.length).toBe(19);
    } finally {
      mock.options.latencyMs = 0;
    }
    await t.app.usage.flush();
    const usage = (await (await t.request(`/api/v1/keys/${k.id}/usage`)).json()) as {
      quota: { tokens_per_month: { used: number } };
    };
    expect(usage.quota.tokens_per_month.used).toBe(100);
    // Nothing stays reserved: the next call is refused for the month's use, not for calls in flight.
    const after = await chat(k.key, 'mock-chat', 'a');
    expect(after.status).toBe(403);
    expect(((await after.json()) as { error: { message: string } }).error.message).toBe(
      'Monthly token quota of this API key exceeded (100 of 100)',
    );
  });

  it('flushes on close: no counts are lost when the server stops', async () => {
    const own: TestDatabase = await openTestDatabase();
    const app = await startTestApp({
      database: own.database,
      gateway: gateway(mock.url),
      config: { usageFlushIntervalMs: 3_600_000 },
    });
    try {
      const k = await app.createKey({ name: 'closing', scopes: ['chat'] });
      for (let i = 0; i < 3; i++) {
        const response = await app.request('/api/v1/chat/completions', {
          method: 'POST',
          key: k.key,
          json: { model: 'mock-chat', messages: [{ role: 'user', content: 'a b' }] },
        });
        expect(response.status).toBe(200);
      }
      expect(await rows(own.database, k.id)).toEqual([]);
      await app.close();
      const [row] = await rows(own.database, k.id);
      expect(row).toMatchObject({ model: 'mock-chat', requests: 3 });
      expect(Number(row?.prompt_tokens)).toBe(6);
    } finally {
      await own.close();
    }
  });
});
