import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { hashSecret } from '../../src/keys/secret.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

describe('API key management', () => {
  it('creates a key shown once, stored only as a hash', async () => {
    const response = await t.request('/api/v1/keys', {
      method: 'POST',
      json: {
        name: 'ci',
        scopes: ['read', 'chat'],
        tier: 'premium',
        collections: ['docs'],
        quota: { tokens_per_month: 1000 },
      },
    });
    expect(response.status).toBe(201);
    const created = (await response.json()) as Record<string, unknown>;
    expect(created.key).toMatch(/^rpk_[0-9A-Za-z]{40}$/);
    expect(created).toMatchObject({
      name: 'ci',
      scopes: ['read', 'chat'],
      tier: 'premium',
      rate_limits: { requests_per_minute: 300, requests_per_hour: 5000, requests_per_day: 50000 },
      collections: ['docs'],
      quota: { requests_per_day: null, tokens_per_month: 1000 },
      expires_at: null,
    });
    expect(created.id).toMatch(/^key_/);
    expect(created.prefix).toBe((created.key as string).slice(0, 10));

    const stored = await queryRows<Record<string, unknown>>(
      t.database.db,
      sql`select * from api_keys where id = ${created.id as string}`,
    );
    expect(stored).toHaveLength(1);
    expect(JSON.stringify(stored)).not.toContain(created.key as string);
    expect(stored[0]?.secret_hash).toBe(hashSecret(created.key as string));

    const fetched = (await (await t.request(`/api/v1/keys/${created.id as string}`)).json()) as Record<string, unknown>;
    expect(fetched.key).toBeUndefined();
    expect(fetched.name).toBe('ci');
    const listed = (await (await t.request('/api/v1/keys')).json()) as { keys: Record<string, unknown>[] };
    expect(listed.keys.map((k) => k.id)).toContain(created.id);
    expect(JSON.stringify(listed)).not.toContain(created.key as string);
  });

  it('the new key works with its scopes', async () => {
    const reader = await t.createKey({ name: 'reader', scopes: ['admin'] });
    const response = await t.request('/api/v1/keys', { key: reader.key });
    expect(response.status).toBe(200);
  });

  it('updates any field but the secret', async () => {
    const k = await t.createKey({ name: 'before', scopes: ['read'] });
    const response = await t.request(`/api/v1/keys/${k.id}`, {
      method: 'PATCH',
      json: {
        name: 'after',
        scopes: ['read', 'write'],
        tier: 'enterprise',
        rate_limits: { requests_per_minute: 5 },
        key: 'rpk_ignored',
      },
    });
    expect(response.status).toBe(200);
    const updated = (await response.json()) as Record<string, unknown>;
    expect(updated).toMatchObject({
      name: 'after',
      scopes: ['read', 'write'],
      tier: 'enterprise',
      rate_limits: { requests_per_minute: 5, requests_per_hour: null, requests_per_day: null },
    });
    expect(updated.key).toBeUndefined();
    // The old secret still works: PATCH never touches it.
    expect((await t.request(`/api/v1/keys/${k.id}`, { key: k.key })).status).toBe(403);
  });

  it('rejects custom rate limits outside the enterprise tier', async () => {
    const response = await t.request('/api/v1/keys', {
      method: 'POST',
      json: { name: 'x', scopes: ['read'], tier: 'standard', rate_limits: { requests_per_minute: 1000 } },
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { type: 'invalid_request_error', param: 'rate_limits' } });
  });

  it('rejects a collection named twice, as a scope named twice, on create and update', async () => {
    const created = await t.request('/api/v1/keys', {
      method: 'POST',
      json: { name: 'x', scopes: ['read'], collections: ['c1', 'c2', 'c1'] },
    });
    expect(created.status).toBe(400);
    expect(await created.json()).toMatchObject({
      error: { type: 'invalid_request_error', message: 'collections: collections must not repeat' },
    });
    const k = await t.createKey({ name: 'once', scopes: ['read'], collections: ['c1'] });
    const updated = await t.request(`/api/v1/keys/${k.id}`, { method: 'PATCH', json: { collections: ['c1', 'c1'] } });
    expect(updated.status).toBe(400);
  });

  it('rejects an expiry in the past and accepts one in the future', async () => {
    const past = await t.request('/api/v1/keys', {
      method: 'POST',
      json: { name: 'x', scopes: ['read'], expires_at: '2001-01-01T00:00:00Z' },
    });
    expect(past.status).toBe(400);
    const future = await t.request('/api/v1/keys', {
      method: 'POST',
      json: { name: 'x', scopes: ['read'], expires_at: '2999-01-01T00:00:00.000Z' },
    });
    expect(future.status).toBe(201);
    expect(((await future.json()) as { expires_at: string }).expires_at).toBe('2999-01-01T00:00:00.000Z');
  });

  it('rotates: a new secret works, the old one stops at once', async () => {
    const k = await t.createKey({ name: 'rot', scopes: ['admin'] });
    const response = await t.request(`/api/v1/keys/${k.id}/rotate`, { method: 'POST' });
    expect(response.status).toBe(200);
    const rotated = (await response.json()) as { key: string; id: string };
    expect(rotated.id).toBe(k.id);
    expect(rotated.key).not.toBe(k.key);
    expect((await t.request('/api/v1/keys', { key: k.key })).status).toBe(401);
    expect((await t.request('/api/v1/keys', { key: rotated.key })).status).toBe(200);
  });

  it('deletes: the key stops at once and disappears from the listing', async () => {
    const k = await t.createKey({ name: 'gone', scopes: ['admin'] });
    const response = await t.request(`/api/v1/keys/${k.id}`, { method: 'DELETE' });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ message: 'API key revoked' });
    expect((await t.request('/api/v1/keys', { key: k.key })).status).toBe(401);
    expect((await t.request(`/api/v1/keys/${k.id}`)).status).toBe(404);
    const again = await t.request(`/api/v1/keys/${k.id}`, { method: 'DELETE' });
    expect(again.status).toBe(404);
    expect(await again.json()).toEqual({
      error: { message: 'API key not found', type: 'not_found_error', code: 'not_found' },
    });
  });

  it('reports usage per window and quota period', async () => {
    const k = await t.createKey({ name: 'counted', scopes: ['admin'], quota: { requests_per_day: 100 } });
    for (let i = 0; i < 3; i++) await t.request('/api/v1/keys', { key: k.key });
    const usage = (await (await t.request(`/api/v1/keys/${k.id}/usage`)).json()) as {
      rate_limits: { window: string; used: number; limit: number; remaining: number }[];
      quota: { requests_per_day: { used: number; limit: number } };
    };
    expect(usage.rate_limits.map((w) => w.window)).toEqual(['minute', 'hour', 'day']);
    expect(usage.rate_limits[0]).toMatchObject({ limit: 60, used: 3, remaining: 57 });
    expect(usage.quota.requests_per_day).toMatchObject({ limit: 100, used: 3 });
  });
});
