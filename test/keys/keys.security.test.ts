import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scopes, type Scope } from '../../src/keys/principal.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { fakeClock } from '../support/clock.ts';
import { authError } from '../support/http.ts';

const clock = fakeClock();
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ clock });
});
afterAll(async () => {
  await t.close();
});

describe('authentication failures', () => {
  it('missing header', async () => {
    const response = await t.request('/api/v1/keys', { key: null });
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual(authError('Missing API key: send the header Authorization: Bearer <key>'));
  });

  it('not a Bearer scheme', async () => {
    const response = await t.request('/api/v1/keys', { key: null, headers: { authorization: `Basic ${btoa('a:b')}` } });
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual(authError('Missing API key: send the header Authorization: Bearer <key>'));
  });

  it('malformed key', async () => {
    const response = await t.request('/api/v1/keys', { key: 'not-a-key' });
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual(authError('Invalid API key'));
  });

  it('unknown well-formed key', async () => {
    const response = await t.request('/api/v1/keys', { key: `rpk_${'A'.repeat(40)}` });
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual(authError('Invalid API key'));
  });

  it('revoked key', async () => {
    const k = await t.createKey({ name: 'r', scopes: ['admin'] });
    await t.request(`/api/v1/keys/${k.id}`, { method: 'DELETE' });
    const response = await t.request('/api/v1/keys', { key: k.key });
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual(authError('API key has been revoked'));
  });

  it('expired key, at the exact instant of expiry', async () => {
    const expiresAt = new Date(clock() + 60_000).toISOString();
    const k = await t.createKey({ name: 'e', scopes: ['admin'], expires_at: expiresAt });
    expect((await t.request('/api/v1/keys', { key: k.key })).status).toBe(200);
    clock.advance(60_000);
    const response = await t.request('/api/v1/keys', { key: k.key });
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual(authError('API key has expired'));
  });

  it('bootstrap admin key authenticates without a database row', async () => {
    expect((await t.request('/api/v1/keys')).status).toBe(200);
  });
});

describe('scope matrix: every route, with and without its scope', () => {
  const concrete = (url: string) => url.replace(/:(\w+)/g, 'x_$1');

  it('covers every /api/v1 route that needs a key', () => {
    expect(t.app.routes.length).toBeGreaterThan(0);
    for (const route of t.app.routes) expect(scopes).toContain(route.access);
  });

  it('a key without the scope gets 403; with it, never 401 or 403', async () => {
    for (const route of t.app.routes) {
      const required = route.access as Scope;
      const others = scopes.filter((s) => s !== required && s !== 'admin');
      const without = await t.createKey({ name: `no-${required}`, scopes: others, tier: 'enterprise' });
      const withIt = await t.createKey({ name: `has-${required}`, scopes: [required], tier: 'enterprise' });
      const init = {
        method: route.method,
        ...(route.method === 'GET' || route.method === 'DELETE' ? {} : { json: {} }),
      };

      const denied = await t.request(concrete(route.url), { ...init, key: without.key });
      expect(denied.status, `${route.method} ${route.url} without ${required}`).toBe(403);
      expect(await denied.json()).toEqual({
        error: {
          message: `This API key lacks the '${required}' scope required here`,
          type: 'permission_error',
          code: 'insufficient_scope',
        },
      });

      const allowed = await t.request(concrete(route.url), { ...init, key: withIt.key });
      expect([401, 403], `${route.method} ${route.url} with ${required}`).not.toContain(allowed.status);
    }
  });
});
