import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logging.ts';
import { withFailover } from '../../src/ratelimit/failover.store.ts';
import { createMemoryStore } from '../../src/ratelimit/memory.store.ts';
import type { RateLimitStore } from '../../src/ratelimit/ratelimit.ts';
import { createRedisStore } from '../../src/ratelimit/redis.store.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { fakeClock } from '../support/clock.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';

const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

async function sharedStore(): Promise<RateLimitStore> {
  const redis = createRedisStore({ url: redisUrl });
  if (!(await redis.connected(5_000))) throw new Error(`Redis is not reachable at ${redisUrl}`);
  return withFailover(redis, createMemoryStore(), 'closed', createLogger('silent'));
}

describe('two instances sharing one database and one Redis', () => {
  const clock = fakeClock();
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  const stores: RateLimitStore[] = [];

  beforeAll(async () => {
    db = await openTestDatabase();
    stores.push(await sharedStore(), await sharedStore());
    // Behind a proxy, so that each test request can come from an address of its own.
    a = await startTestApp({ database: db.database, limiter: stores[0], clock, config: { trustProxy: true } });
    b = await startTestApp({
      database: db.database,
      limiter: stores[1],
      clock,
      config: { adminKey: a.adminKey, trustProxy: true },
    });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await Promise.all(stores.map((s) => s.close()));
    await db.close();
  });

  it('never admit more than the limit together', async () => {
    clock.set(clock() - (clock() % 60_000));
    const k = await a.createKey({
      name: 'shared',
      scopes: ['admin'],
      tier: 'enterprise',
      rate_limits: { requests_per_minute: 30 },
    });
    const responses = await Promise.all(
      Array.from({ length: 100 }, (_, i) => (i % 2 === 0 ? a : b).request('/api/v1/keys', { key: k.key })),
    );
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(30);
    expect(statuses.filter((s) => s === 429)).toHaveLength(70);
    await Promise.all(responses.map((r) => r.arrayBuffer()));
  });

  it('an address over the unauthenticated limit is refused, valid key or not, on every instance', async () => {
    clock.set(clock() - (clock() % 60_000));
    const k = await a.createKey({ name: 'from-a-busy-address', scopes: ['admin'] });
    const octet = () => Math.floor(Math.random() * 250);
    const headers = { 'x-forwarded-for': `10.${octet()}.${octet()}.${octet()}` };
    // A answers the address's first 60 guesses with 401: it never refuses the address itself.
    for (let i = 0; i < 60; i++) {
      expect((await a.request('/api/v1/keys', { key: `rpk_${'D'.repeat(40)}`, headers })).status).toBe(401);
    }
    expect((await a.request('/api/v1/keys', { key: k.key, headers })).status).toBe(200);
    // The 61st, on B, is over the shared count: B refuses the address, and tells A.
    expect((await b.request('/api/v1/keys', { key: `rpk_${'D'.repeat(40)}`, headers })).status).toBe(429);
    expect((await b.request('/api/v1/keys', { key: k.key, headers })).status).toBe(429);
    let onA = 0;
    for (let i = 0; i < 40 && onA !== 429; i++) {
      onA = (await a.request('/api/v1/keys', { key: k.key, headers })).status;
      if (onA !== 429) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(onA).toBe(429);
    // Other addresses are served; the address is again once the minute resets.
    expect((await a.request('/api/v1/keys', { key: k.key })).status).toBe(200);
    clock.advance(60_000);
    expect((await a.request('/api/v1/keys', { key: k.key, headers })).status).toBe(200);
  });

  it('a key revoked on one instance is rejected on the other at once', async () => {
    const k = await a.createKey({ name: 'revoke-me', scopes: ['admin'] });
    expect((await b.request('/api/v1/keys', { key: k.key })).status).toBe(200);
    expect((await a.request(`/api/v1/keys/${k.id}`, { method: 'DELETE' })).status).toBe(200);
    expect((await b.request('/api/v1/keys', { key: k.key })).status).toBe(401);
  });

  it('a key rotated on one instance: the old secret fails on the other at once', async () => {
    const k = await b.createKey({ name: 'rotate-me', scopes: ['admin'] });
    expect((await a.request('/api/v1/keys', { key: k.key })).status).toBe(200);
    const rotated = (await (await b.request(`/api/v1/keys/${k.id}/rotate`, { method: 'POST' })).json()) as {
      key: string;
    };
    expect((await a.request('/api/v1/keys', { key: k.key })).status).toBe(401);
    expect((await a.request('/api/v1/keys', { key: rotated.key })).status).toBe(200);
  });
});
