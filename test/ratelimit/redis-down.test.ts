import { spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logging.ts';
import { createLimiter } from '../../src/ratelimit/create.ts';
import { startTestApp } from '../support/app.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';
import { until } from '../support/poll.ts';

// Nothing listens on port 1: the store never connects.
const deadRedis = 'redis://127.0.0.1:1';

let db: TestDatabase;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  await db.close();
});

describe('Redis unreachable', () => {
  it('local mode: requests are served with per-instance limits; /readyz says degraded', async () => {
    const limiter = await createLimiter({
      redisUrl: deadRedis,
      redisFailureMode: 'local',
      logger: createLogger('silent'),
    });
    const t = await startTestApp({ database: db.database, limiter, config: { redisFailureMode: 'local' } });
    try {
      const k = await t.createKey({
        name: 'l',
        scopes: ['admin'],
        tier: 'enterprise',
        rate_limits: { requests_per_minute: 3 },
      });
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await t.request('/api/v1/keys', { key: k.key })).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
      const ready = await fetch(`${t.url}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toMatchObject({
        status: 'degraded',
        checks: { rate_limits: { ok: false, detail: expect.stringContaining('limits enforced per instance') } },
      });
    } finally {
      await t.close();
      await limiter.close();
    }
  });

  it('closed mode: requests are refused with 503 at once; /readyz is 503', async () => {
    const limiter = await createLimiter({
      redisUrl: deadRedis,
      redisFailureMode: 'closed',
      logger: createLogger('silent'),
    });
    const t = await startTestApp({ database: db.database, limiter, config: { redisFailureMode: 'closed' } });
    try {
      const response = await t.request('/api/v1/keys');
      expect(response.status).toBe(503);
      expect(await response.json()).toEqual({
        error: { message: 'Rate limiting is unavailable', type: 'api_error', code: 'service_unavailable' },
      });
      const ready = await fetch(`${t.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as { status: string }).status).toBe('unavailable');
    } finally {
      await t.close();
      await limiter.close();
    }
  });
});

describe('Redis that comes back', () => {
  it('is seen back without a request: readiness returns on its own', async () => {
    // A Redis of its own, paused (SIGSTOP): its connection stays up while commands time out.
    // Before, only a request that got through cleared the failure: behind a load balancer that
    // sends nothing to an instance not ready, /readyz stayed 503 (closed mode) for good.
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    const redis = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      {
        stdio: 'ignore',
      },
    );
    const limiter = await createLimiter({
      redisUrl: `redis://127.0.0.1:${port}`,
      redisFailureMode: 'closed',
      logger: createLogger('silent'),
    });
    const t = await startTestApp({ database: db.database, limiter, config: { redisFailureMode: 'closed' } });
    try {
      await until('Redis to be ready', async () =>
        (await fetch(`${t.url}/readyz`)).status === 200 ? true : undefined,
      );
      redis.kill('SIGSTOP');
      expect((await t.request('/api/v1/keys')).status).toBe(503);
      expect((await fetch(`${t.url}/readyz`)).status).toBe(503);
      redis.kill('SIGCONT');
      // No request but readiness polls from here on.
      await until(
        '/readyz to be 200 again',
        async () => ((await fetch(`${t.url}/readyz`)).status === 200 ? true : undefined),
        {
          timeoutMs: 10_000,
        },
      );
      expect((await t.request('/api/v1/keys')).status).toBe(200);

      // A Redis that answers reads but refuses writes (out of memory): not ready while it does.
      const admin = new Redis(`redis://127.0.0.1:${port}`);
      try {
        await admin.config('SET', 'maxmemory-policy', 'noeviction');
        await admin.config('SET', 'maxmemory', '1');
        expect((await t.request('/api/v1/keys')).status).toBe(503);
        await new Promise((resolve) => setTimeout(resolve, 2_500));
        const short = await fetch(`${t.url}/readyz`);
        expect(short.status).toBe(503);
        expect(JSON.stringify(await short.json())).toContain('but its commands fail; requests refused');
        await admin.config('SET', 'maxmemory', '0');
        await until(
          '/readyz to be 200 once writes are taken',
          async () => ((await fetch(`${t.url}/readyz`)).status === 200 ? true : undefined),
          { timeoutMs: 10_000 },
        );
      } finally {
        admin.disconnect();
      }
    } finally {
      redis.kill('SIGCONT');
      await t.close();
      await limiter.close();
      redis.kill('SIGKILL');
    }
  });
});
