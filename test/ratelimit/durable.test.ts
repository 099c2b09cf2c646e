/**
 * Without Redis, a key's hour, day and daily-quota windows outlive a restart of the process that
 * counted them: a `requests_per_day` quota holds across a deploy or a crash. Two apps, one after
 * the other, on one real database, each with its own in-process store.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryStore } from '../../src/ratelimit/memory.store.ts';
import type { LimitWindow } from '../../src/ratelimit/ratelimit.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';

interface Usage {
  rate_limits: { window: string; used: number }[];
  quota: { requests_per_day: { used: number; limit: number } };
}

let db: TestDatabase;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(() => db.close());

const start = (flushMs = 60_000) => startTestApp({ database: db.database, config: { usageFlushIntervalMs: flushMs } });

const usageOf = async (t: TestApp, id: string) => (await (await t.request(`/api/v1/keys/${id}/usage`)).json()) as Usage;

describe('rate-limit windows across restarts (no Redis)', () => {
  it('a stopped process saves its counts: the next one refuses the request over the daily quota', async () => {
    const first = await start();
    const key = await first.createKey({ name: 'daily', scopes: ['read'], quota: { requests_per_day: 3 } });
    for (let i = 0; i < 3; i++) expect((await first.request('/api/v1/models', { key: key.key })).status).toBe(200);
    expect((await first.request('/api/v1/models', { key: key.key })).status).toBe(403);
    await first.close();

    const second = await start();
    try {
      const refused = await second.request('/api/v1/models', { key: key.key });
      expect(refused.status).toBe(403);
      expect(await refused.json()).toMatchObject({ error: { code: 'quota_exceeded' } });
      const usage = await usageOf(second, key.id);
      expect(usage.quota.requests_per_day).toMatchObject({ used: 3, limit: 3 });
      // The hour and day windows went on from where they were; the minute one starts afresh.
      expect(usage.rate_limits).toEqual([
        expect.objectContaining({ window: 'minute', used: 0 }),
        expect.objectContaining({ window: 'hour', used: 3 }),
        expect.objectContaining({ window: 'day', used: 3 }),
      ]);
    } finally {
      await second.close();
    }
  });

  it('a process that dies without stopping loses at most one write interval', async () => {
    const crashed = await start(50);
    const key = await crashed.createKey({ name: 'crashed', scopes: ['read'], quota: { requests_per_day: 2 } });
    for (let i = 0; i < 2; i++) expect((await crashed.request('/api/v1/models', { key: key.key })).status).toBe(200);
    // Two intervals pass; then another process takes over while this one is never closed
    // (its store is not written again: as after a SIGKILL).
    await new Promise((resolve) => setTimeout(resolve, 200));
    const next = await start();
    try {
      expect((await next.request('/api/v1/models', { key: key.key })).status).toBe(403);
    } finally {
      await next.close();
      await crashed.close();
    }
  });
});

describe('the in-process store’s counters', () => {
  const windows: LimitWindow[] = [
    { name: 'minute', seconds: 60, limit: 100, kind: 'rate' },
    { name: 'hour', seconds: 3_600, limit: 100, kind: 'rate' },
    { name: 'quota_day', seconds: 86_400, limit: 5, kind: 'quota' },
  ];
  const now = Date.UTC(2026, 10, 27, 12, 0, 0);

  it('hands out the windows of an hour or more counted since the last call, once', async () => {
    const store = createMemoryStore();
    await store.consume('key:a', windows, now);
    await store.consume('key:a', windows, now);
    const changed = store.takeChanged();
    expect(changed.map((c) => [c.key.split(':').at(-2), c.count]).sort()).toEqual([
      ['hour', 2],
      ['quota_day', 2],
    ]);
    expect(store.takeChanged()).toEqual([]);
  });

  it('seeds kept counts, keeps a higher count of its own, and ignores windows that ended', async () => {
    const store = createMemoryStore();
    await store.consume('key:a', windows, now);
    const [hour, day] = store.takeChanged().sort((a, b) => a.key.localeCompare(b.key));
    store.seed(
      [
        { key: (hour as { key: string }).key, count: 0, expiresAtMs: now + 3_600_000 },
        { key: (day as { key: string }).key, count: 4, expiresAtMs: now + 3_600_000 },
        { key: 'rl:{key:b}:quota_day:0', count: 9, expiresAtMs: now - 1 },
      ],
      now,
    );
    const outcome = await store.peek('key:a', windows, now);
    expect(outcome.windows.map((w) => w.used)).toEqual([1, 1, 4]);
    expect((await store.consume('key:a', windows, now)).allowed).toBe(true);
    expect((await store.consume('key:a', windows, now)).allowed).toBe(false);
  });
});
