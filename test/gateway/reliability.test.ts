import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

let primary: MockUpstream;
let secondary: MockUpstream;
let t: TestApp;
let now = 1_800_000_000_000;

beforeAll(async () => {
  primary = await startMockUpstream();
  secondary = await startMockUpstream();
  t = await startTestApp({
    clock: () => now,
    gateway: {
      providers: [
        { name: 'primary', base_url: primary.url, models: ['mock-chat'], priority: 0, max_retries: 1 },
        { name: 'secondary', base_url: secondary.url, models: ['mock-chat'], priority: 1, max_retries: 0 },
      ],
      retry: { base_delay_ms: 1, max_delay_ms: 5 },
      circuit_breaker: { failure_threshold: 3, cooldown_ms: 10_000 },
    },
  });
});
afterAll(async () => {
  await t.close();
  await primary.close();
  await secondary.close();
});
const chat = (stream = false) =>
  t.request('/api/v1/chat/completions', {
    method: 'POST',
    json: { model: 'mock-chat', messages: [{ role: 'user', content: 'hi' }], stream },
  });
// Each test starts with a healthy primary: past any cool-down, one success closes its breaker.
beforeEach(async () => {
  now += 60_000;
  expect((await chat()).status).toBe(200);
  primary.reset();
  secondary.reset();
});

const calls = (mock: MockUpstream) => mock.count('/v1/chat/completions');

describe('retries, failover and the circuit breaker', () => {
  it('uses the provider of highest priority while it is healthy', async () => {
    expect((await chat()).status).toBe(200);
    expect([calls(primary), calls(secondary)]).toEqual([1, 0]);
  });

  it('retries a failing provider, then fails over to the next serving the model', async () => {
    primary.inject({ kind: 'status', status: 500 }, 2);
    const response = await chat();
    expect(response.status).toBe(200);
    expect([calls(primary), calls(secondary)]).toEqual([2, 1]);
  });

  it('fails over for streams too, before the first byte', async () => {
    primary.inject({ kind: 'status', status: 502 }, 2);
    const response = await chat(true);
    expect(await response.text()).toBe(secondary.requests[0]?.sent.replace(/data: \{[^\n]*"usage":\{[^\n]*\n\n/, ''));
    expect([calls(primary), calls(secondary)]).toEqual([2, 1]);
  });

  it('does not fail over on a client error', async () => {
    primary.inject({ kind: 'status', status: 400, message: 'bad' });
    expect((await chat()).status).toBe(400);
    expect([calls(primary), calls(secondary)]).toEqual([1, 0]);
  });

  it('opens the breaker after consecutive failures, skips the provider, then tries it again after the cool-down', async () => {
    primary.inject({ kind: 'status', status: 503 }, 3);
    // Two failures on the first request, one on the second: the third opens the breaker.
    expect((await chat()).status).toBe(200);
    expect((await chat()).status).toBe(200);
    expect(calls(primary)).toBe(3);
    expect(t.app.gateway.providers()).toEqual([
      { name: 'primary', breaker: 'open' },
      { name: 'secondary', breaker: 'closed' },
    ]);
    for (let i = 0; i < 3; i++) expect((await chat()).status).toBe(200);
    expect(calls(primary)).toBe(3);
    expect(calls(secondary)).toBe(5);

    now += 10_000;
    expect(t.app.gateway.providers()[0]?.breaker).toBe('half_open');
    expect((await chat()).status).toBe(200);
    expect(calls(primary)).toBe(4);
    expect(t.app.gateway.providers()[0]?.breaker).toBe('closed');
  });

  it('a failed trial in half-open state opens the breaker again at once', async () => {
    primary.inject({ kind: 'status', status: 503 }, 3);
    await chat();
    await chat();
    now += 10_000;
    primary.inject({ kind: 'status', status: 503 });
    expect((await chat()).status).toBe(200);
    expect(calls(primary)).toBe(4);
    expect(t.app.gateway.providers()[0]?.breaker).toBe('open');
    now += 10_000;
    await chat();
  });

  it('every provider down: 502 after trying each', async () => {
    primary.inject({ kind: 'status', status: 500 }, 2);
    secondary.inject({ kind: 'status', status: 500 });
    const response = await chat();
    expect(response.status).toBe(502);
    expect([calls(primary), calls(secondary)]).toEqual([2, 1]);
    // Breakers still closed: nothing to say about when to come back.
    expect(response.headers.get('retry-after')).toBeNull();
  });

  it('every breaker open: the 502 says with Retry-After when the first provider takes a trial again', async () => {
    primary.inject({ kind: 'status', status: 503 }, 100);
    secondary.inject({ kind: 'status', status: 503 }, 100);
    // 2 + 1 failures per request: the primary's breaker opens on the second, the secondary's on the third.
    for (let i = 0; i < 3; i++) expect((await chat()).status).toBe(502);
    expect(t.app.gateway.providers().map((p) => p.breaker)).toEqual(['open', 'open']);
    const before = [calls(primary), calls(secondary)];
    now += 4_000;
    const refused = await chat();
    expect(refused.status).toBe(502);
    expect([calls(primary), calls(secondary)]).toEqual(before); // neither was tried
    // The primary opened first: 10 s cool-down, 4 s of it gone.
    expect(refused.headers.get('retry-after')).toBe('6');
    primary.reset();
    secondary.reset();
    now += 10_000;
  });
});
