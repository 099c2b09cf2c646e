/**
 * Cross-origin access (`CORS_ORIGINS`): off by default; for a listed origin, every answer (errors
 * and streams too) says the page may read it, and a preflight is answered before authentication
 * and rate limits; another origin gets nothing. Over real HTTP against the whole app.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { parseCorsOrigins } from '../../src/http/cors.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

const page = 'https://app.example.com';
const preflight = (origin: string, headers = 'authorization, content-type, x-stainless-os') => ({
  method: 'OPTIONS',
  headers: {
    origin,
    'access-control-request-method': 'POST',
    'access-control-request-headers': headers,
  },
});

describe('CORS_ORIGINS unset (the default)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it('adds nothing, and a preflight finds no route', async () => {
    const r = await t.request('/api/v1/models', { headers: { origin: page } });
    expect(r.status).toBe(200);
    expect(r.headers.get('access-control-allow-origin')).toBeNull();
    const pre = await fetch(`${t.url}/api/v1/chat/completions`, preflight(page));
    expect(pre.status).toBe(404);
    expect(pre.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('CORS_ORIGINS listing origins', () => {
  let t: TestApp;
  let mock: MockUpstream;
  beforeAll(async () => {
    mock = await startMockUpstream();
    t = await startTestApp({
      config: { corsOrigins: parseCorsOrigins(`${page}, http://localhost:3000`), unauthenticatedPerMinute: 2 },
      gateway: { providers: [{ name: 'mock', base_url: mock.url, models: ['mock-chat'] }] },
    });
  });
  afterAll(async () => {
    await t.close();
    await mock.close();
  });

  it('a preflight from a listed origin: 204 with what the browser asked, no key and no rate limit spent', async () => {
    // More preflights than the address's budget of unauthenticated requests: none is counted.
    for (let i = 0; i < 4; i++) {
      const r = await fetch(`${t.url}/api/v1/chat/completions`, preflight(page));
      expect(r.status).toBe(204);
      expect(r.headers.get('access-control-allow-origin')).toBe(page);
      expect(r.headers.get('access-control-allow-methods')).toBe('GET, POST, PUT, PATCH, DELETE');
      expect(r.headers.get('access-control-allow-headers')).toBe('authorization, content-type, x-stainless-os');
      expect(r.headers.get('access-control-max-age')).toBe('600');
      expect(r.headers.get('vary')).toMatch(/Origin/);
      expect(r.headers.get('x-ratelimit-limit')).toBeNull();
      expect(await r.text()).toBe('');
    }
    const unauthenticated = await fetch(`${t.url}/api/v1/models`);
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.headers.get('x-ratelimit-remaining')).toBe('1');
  });

  it('answers to a listed origin say so and expose the ids and limits, errors and streams included', async () => {
    const ok = await t.request('/api/v1/models', { headers: { origin: 'http://localhost:3000' } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('access-control-allow-origin')).toBe('http://localhost:3000');
    expect(ok.headers.get('vary')).toBe('Origin');
    expect(ok.headers.get('access-control-expose-headers')).toBe(
      'x-request-id, x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset, retry-after',
    );

    const refused = await t.request('/api/v1/models', { key: 'rpk_not-a-key', headers: { origin: page } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('access-control-allow-origin')).toBe(page);

    const stream = await t.request('/api/v1/chat/completions', {
      method: 'POST',
      headers: { origin: page },
      json: { model: 'mock-chat', stream: true, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(stream.headers.get('access-control-allow-origin')).toBe(page);
    expect(await stream.text()).toMatch(/data: \[DONE\]\n\n$/);
  });

  it('another origin gets no CORS headers, and its preflight is not answered', async () => {
    const r = await t.request('/api/v1/models', { headers: { origin: 'https://evil.example' } });
    expect(r.status).toBe(200);
    expect(r.headers.get('access-control-allow-origin')).toBeNull();
    expect(r.headers.get('vary')).toBe('Origin');
    const pre = await fetch(`${t.url}/api/v1/chat/completions`, preflight('https://evil.example'));
    expect(pre.status).toBe(404);
    expect(pre.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('CORS_ORIGINS=*', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ config: { corsOrigins: parseCorsOrigins('*') } });
  });
  afterAll(() => t.close());

  it('any origin may read the answers (no credentials are involved: the key travels in a header)', async () => {
    const r = await t.request('/api/v1/models', { headers: { origin: 'https://anywhere.example' } });
    expect(r.headers.get('access-control-allow-origin')).toBe('*');
    expect(r.headers.get('vary')).toBeNull();
    const pre = await fetch(`${t.url}/api/v1/embeddings`, preflight('https://anywhere.example', 'authorization'));
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
  });
});

describe('the CORS_ORIGINS setting', () => {
  it('takes a list of origins or *, and refuses what is not an origin', () => {
    expect(loadConfig({}).corsOrigins).toBe('none');
    expect(loadConfig({ CORS_ORIGINS: '*' }).corsOrigins).toBe('any');
    expect(loadConfig({ CORS_ORIGINS: 'https://a.example, http://localhost:5173/' }).corsOrigins).toEqual(
      new Set(['https://a.example', 'http://localhost:5173']),
    );
    for (const bad of ['a.example', 'https://a.example/app', 'ftp://a.example', '*, https://a.example']) {
      expect(() => loadConfig({ CORS_ORIGINS: bad }), bad).toThrow(/CORS_ORIGINS/);
    }
  });
});
