import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logging.ts';
import { withFailover } from '../../src/ratelimit/failover.store.ts';
import { createMemoryStore } from '../../src/ratelimit/memory.store.ts';
import type { RateLimitStore } from '../../src/ratelimit/ratelimit.ts';
import { createRedisStore } from '../../src/ratelimit/redis.store.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { fakeClock } from '../support/clock.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';

export const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

const stores: Record<string, () => Promise<RateLimitStore>> = {
  memory: async () => createMemoryStore(),
  redis: async () => {
    const redis = createRedisStore({ url: redisUrl });
    if (!(await redis.connected(5_000))) throw new Error(`Redis is not reachable at ${redisUrl}`);
    return withFailover(redis, createMemoryStore(), 'closed', createLogger('silent'));
  },
};

let db: TestDatabase;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  await db.close();
});

const limitHeaders = (r: Response) => ({
  limit: r.headers.get('x-ratelimit-limit'),
  remaining: r.headers.get('x-ratelimit-remaining'),
  reset: r.headers.get('x-ratelimit-reset'),
});

describe.each(Object.keys(stores))('rate limits with the %s store', (storeName) => {
  const clock = fakeClock();
  let t: TestApp;
  let store: RateLimitStore;
  beforeAll(async () => {
    store = await (stores[storeName] as () => Promise<RateLimitStore>)();
    t = await startTestApp({ database: db.database, limiter: store, clock, config: { trustProxy: true } });
  });
  afterAll(async () => {
    await t.close();
    await store.close();
  });

  const startOfMinute = () => clock.set(clock() - (clock() % 60_000));

  it('standard tier: exactly 60 per minute, headers on 2xx, 4xx and 429, reset at the next minute', async () => {
    startOfMinute();
    const k = await t.createKey({ name: 'std', scopes: ['read'] });
    const minuteEnd = Math.floor(clock() / 1000) - (Math.floor(clock() / 1000) % 60) + 60;
    for (let i = 1; i <= 60; i++) {
      // A 403 (no admin scope) still counts: every request of a key does.
      const response = await t.request('/api/v1/keys', { key: k.key });
      expect(response.status).toBe(403);
      expect(limitHeaders(response)).toEqual({ limit: '60', remaining: String(60 - i), reset: String(minuteEnd) });
    }
    clock.advance(59_999);
    const refused = await t.request('/api/v1/keys', { key: k.key });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toEqual({
      error: {
        message: expect.stringContaining('60 requests per minute'),
        type: 'rate_limit_error',
        code: 'rate_limit_exceeded',
      },
    });
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(limitHeaders(refused)).toEqual({ limit: '60', remaining: '0', reset: String(minuteEnd) });
    clock.advance(1);
    const again = await t.request('/api/v1/keys', { key: k.key });
    expect(again.status).toBe(403);
    // After the minute resets, the hour window (1000 - 61 left) is not yet the tightest one.
    expect(limitHeaders(again)).toMatchObject({ limit: '60', remaining: '59' });
  });

  it('a 2xx response carries the headers', async () => {
    const k = await t.createKey({ name: 'ok', scopes: ['admin'] });
    const response = await t.request('/api/v1/keys', { key: k.key });
    expect(response.status).toBe(200);
    expect(limitHeaders(response).limit).toBe('60');
  });

  it('hour and day windows are exact at their boundaries (enterprise custom limits)', async () => {
    clock.set(clock() - (clock() % 86_400_000));
    const k = await t.createKey({
      name: 'ent',
      scopes: ['admin'],
      tier: 'enterprise',
      rate_limits: { requests_per_minute: null, requests_per_hour: 3, requests_per_day: 5 },
    });
    const hourEnd = Math.floor(clock() / 1000) + 3600;
    for (let i = 0; i < 3; i++) expect((await t.request('/api/v1/keys', { key: k.key })).status).toBe(200);
    clock.advance(3_599_999);
    const hourRefused = await t.request('/api/v1/keys', { key: k.key });
    expect(hourRefused.status).toBe(429);
    expect(limitHeaders(hourRefused)).toEqual({ limit: '3', remaining: '0', reset: String(hourEnd) });
    expect(hourRefused.headers.get('retry-after')).toBe('1');
    clock.advance(1);
    expect((await t.request('/api/v1/keys', { key: k.key })).status).toBe(200);
    const fifth = await t.request('/api/v1/keys', { key: k.key });
    expect(fifth.status).toBe(200);
    expect(limitHeaders(fifth)).toMatchObject({ limit: '5', remaining: '0' });
    const dayRefused = await t.request('/api/v1/keys', { key: k.key });
    expect(dayRefused.status).toBe(429);
    const dayEnd = Math.floor(clock() / 1000) - (Math.floor(clock() / 1000) % 86_400) + 86_400;
    expect(limitHeaders(dayRefused)).toEqual({ limit: '5', remaining: '0', reset: String(dayEnd) });
    expect(Number(dayRefused.headers.get('retry-after'))).toBe(dayEnd - Math.floor(clock() / 1000));
    clock.set(dayEnd * 1000);
    expect((await t.request('/api/v1/keys', { key: k.key })).status).toBe(200);
  });

  it('refused requests are not counted', async () => {
    startOfMinute();
    const k = await t.createKey({
      name: 'ent2',
      scopes: ['admin'],
      tier: 'enterprise',
      rate_limits: { requests_per_minute: 2 },
    });
    for (let i = 0; i < 2; i++) await t.request('/api/v1/keys', { key: k.key });
    for (let i = 0; i < 5; i++) expect((await t.request('/api/v1/keys', { key: k.key })).status).toBe(429);
    clock.advance(60_000);
    const next = await t.request('/api/v1/keys', { key: k.key });
    expect(next.status).toBe(200);
    expect(next.headers.get('x-ratelimit-remaining')).toBe('1');
  });

  it('an enterprise key with no limits is never refused, and its answers report the unbounded daily window', async () => {
    const k = await t.createKey({ name: 'unl', scopes: ['admin'], tier: 'enterprise' });
    for (let i = 0; i < 80; i++) expect((await t.request('/api/v1/keys', { key: k.key })).status).toBe(200);
    const unbounded = 2 ** 52;
    const nextDay = Math.floor(clock() / 86_400_000 + 1) * 86_400;
    expect(limitHeaders(await t.request('/api/v1/keys', { key: k.key }))).toEqual({
      limit: String(unbounded),
      remaining: String(unbounded - 81),
      reset: String(nextDay),
    });
    // The bootstrap admin key too: every answer to an authenticated request carries them.
    expect(limitHeaders(await t.request('/api/v1/keys'))).toMatchObject({ limit: String(unbounded) });
  });

  it('a path no route serves: with a valid key counted and answered 404 with the headers; a wrong key 401, counted against the address; without one, a plain 404', async () => {
    const k = await t.createKey({ name: 'lost', scopes: ['read'], tier: 'standard' });
    expect((await t.request('/api/v1/collections-typo', { key: k.key })).headers.get('x-ratelimit-remaining')).toBe(
      '59',
    );
    const lost = await t.request('/api/v1/collections-typo', { key: k.key });
    expect(lost.status).toBe(404);
    expect(await lost.json()).toMatchObject({ error: { code: 'not_found' } });
    expect(limitHeaders(lost)).toMatchObject({ limit: '60', remaining: '58' });
    // The unknown paths counted with the rest of the key's requests.
    expect((await t.request('/api/v1/rag/collections', { key: k.key })).headers.get('x-ratelimit-remaining')).toBe(
      '57',
    );
    const plain = await t.request('/api/v1/collections-typo', { key: null });
    expect(plain.status).toBe(404);
    expect(plain.headers.get('x-ratelimit-limit')).toBeNull();
    // Guessing keys there is throttled as anywhere: before, every guess was a 404 counted nowhere,
    // and only a right one came with headers.
    const guesses = [];
    for (let i = 0; i < 2; i++)
      guesses.push(await t.request('/api/v1/collections-typo', { key: 'rpk_not-a-real-key' }));
    for (const guess of guesses) {
      expect(guess.status).toBe(401);
      expect(await guess.json()).toMatchObject({ error: { type: 'authentication_error', code: 'invalid_api_key' } });
    }
    const [first, second] = guesses.map((guess) => Number(guess.headers.get('x-ratelimit-remaining')));
    expect(second).toBe((first ?? 0) - 1);
  });

  it('a daily request quota answers 403 quota_exceeded', async () => {
    const k = await t.createKey({ name: 'q', scopes: ['admin'], tier: 'enterprise', quota: { requests_per_day: 2 } });
    for (let i = 0; i < 2; i++) expect((await t.request('/api/v1/keys', { key: k.key })).status).toBe(200);
    const response = await t.request('/api/v1/keys', { key: k.key });
    expect(response.status).toBe(403);
    expect(await response.json()).toEqual({
      error: {
        message: 'Daily request quota of this API key exceeded',
        type: 'permission_error',
        code: 'quota_exceeded',
      },
    });
  });

  it('a daily request quota with fewer requests left than the rate windows is the window the headers report', async () => {
    startOfMinute();
    const k = await t.createKey({ name: 'q-std', scopes: ['admin'], tier: 'standard', quota: { requests_per_day: 3 } });
    const nextDay = Math.floor(clock() / 86_400_000 + 1) * 86_400;
    const first = await t.request('/api/v1/keys', { key: k.key });
    expect(limitHeaders(first)).toEqual({ limit: '3', remaining: '2', reset: String(nextDay) });
    for (let i = 0; i < 2; i++) await t.request('/api/v1/keys', { key: k.key });
    // Before, the refusal said `Limit 60, Remaining 57` of the minute while the day was over.
    const refused = await t.request('/api/v1/keys', { key: k.key });
    expect(refused.status).toBe(403);
    expect(limitHeaders(refused)).toEqual({ limit: '3', remaining: '0', reset: String(nextDay) });
  });

  it('unauthenticated requests are limited per address before any key lookup', async () => {
    startOfMinute();
    const address = `10.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`;
    const other = `${address}9`.replace(/\.(\d+)9$/, '.$1').replace(/^10\./, '11.');
    const headers = { 'x-forwarded-for': address };
    for (let i = 1; i <= 60; i++) {
      const response = await t.request('/api/v1/keys', { key: `rpk_${'B'.repeat(40)}`, headers });
      expect(response.status).toBe(401);
      expect(response.headers.get('x-ratelimit-remaining')).toBe(String(60 - i));
    }
    const blocked = await t.request('/api/v1/keys', { key: `rpk_${'B'.repeat(40)}`, headers });
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('retry-after')).not.toBeNull();
    // The address is refused before any lookup, valid key or not; another address is unaffected.
    const k = await t.createKey({ name: 'fine', scopes: ['admin'] });
    expect((await t.request('/api/v1/keys', { key: k.key, headers })).status).toBe(429);
    expect((await t.request('/api/v1/keys', { key: k.key, headers: { 'x-forwarded-for': other } })).status).toBe(200);
    expect((await t.request('/api/v1/keys', { key: null, headers: { 'x-forwarded-for': other } })).status).toBe(401);
    // Even a valid-looking guess from the blocked address is refused without a lookup.
    expect((await t.request('/api/v1/keys', { key: `rpk_${'C'.repeat(40)}`, headers })).status).toBe(429);
    clock.advance(60_000);
    expect((await t.request('/api/v1/keys', { key: `rpk_${'C'.repeat(40)}`, headers })).status).toBe(401);
  });

  it('with TRUST_PROXY=true the address is the one the nearest proxy appended, not what the client wrote first', async () => {
    startOfMinute();
    const address = `12.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`;
    // A client behind a load balancer that appends its address: before, each made-up first entry
    // was an address of its own, so the limit never applied (100 guesses, 100 401s).
    const statuses = [];
    for (let i = 0; i < 61; i++) {
      const headers = { 'x-forwarded-for': `10.9.${i}.1, ${address}` };
      statuses.push((await t.request('/api/v1/keys', { key: `rpk_${'D'.repeat(40)}`, headers })).status);
    }
    expect(statuses.slice(0, 60).every((status) => status === 401)).toBe(true);
    expect(statuses[60]).toBe(429);
  });

  it('an IPv6 client is counted by its /64, and an address by one spelling (mapped, case, port)', async () => {
    startOfMinute();
    const net = Math.floor(Math.random() * 0xffff).toString(16);
    // Each full address in one /64 was a fresh budget: 65 guesses, 65 401s.
    const v6 = [];
    for (let i = 0; i < 61; i++) {
      const headers = { 'x-forwarded-for': `2001:db8:${net}:7::${(i + 1).toString(16)}` };
      v6.push((await t.request('/api/v1/keys', { key: `rpk_${'E'.repeat(40)}`, headers })).status);
    }
    expect(v6.slice(0, 60).every((status) => status === 401)).toBe(true);
    expect(v6[60]).toBe(429);
    // Another /64 is another client.
    const other = await t.request('/api/v1/keys', {
      key: `rpk_${'E'.repeat(40)}`,
      headers: { 'x-forwarded-for': `2001:db8:${net}:8::1` },
    });
    expect(other.status).toBe(401);

    startOfMinute();
    const v4 = `13.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.7`;
    const spellings = [v4, `::ffff:${v4}`, `${v4}:5000`, `::FFFF:${v4}`];
    const mixed = [];
    for (let i = 0; i < 61; i++) {
      const headers = { 'x-forwarded-for': spellings[i % spellings.length] as string };
      mixed.push((await t.request('/api/v1/keys', { key: `rpk_${'F'.repeat(40)}`, headers })).status);
    }
    expect(mixed[60]).toBe(429);
  });
});
