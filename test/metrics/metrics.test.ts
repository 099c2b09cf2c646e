import { connect } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics/metrics.ts';
import { startMetricsServer } from '../../src/http/metrics-server.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import { metricValue, parseMetrics, scrape, type Sample } from '../support/metrics.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

const token = 'metrics-token-0123456789abcdef';

describe('GET /metrics', () => {
  let mock: MockUpstream;
  let t: TestApp;
  const samples = () => scrape(`${t.url}/metrics`, token);

  beforeAll(async () => {
    mock = await startMockUpstream({ completionTokens: 3 });
    t = await startTestApp({
      config: { metrics: { token, port: undefined } },
      gateway: {
        providers: [{ name: 'mock', base_url: mock.url, models: ['mock-chat'], max_retries: 1 }],
        retry: { base_delay_ms: 1, max_delay_ms: 5 },
      },
    });
  });
  afterAll(async () => {
    await t.close();
    await mock.close();
  });

  it('needs its own token: none, a wrong one and an API key are 401; the token gets the text format', async () => {
    for (const authorization of [undefined, 'Bearer wrong-token-0123456789', `Bearer ${t.adminKey}`]) {
      const response = await fetch(`${t.url}/metrics`, authorization ? { headers: { authorization } } : {});
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer');
      expect(await response.json()).toEqual({
        error: { message: 'Invalid or missing metrics token', type: 'authentication_error', code: 'invalid_api_key' },
      });
    }
    const response = await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    expect(text).toContain('# TYPE ragport_http_requests_total counter');
    expect(text).toContain('# TYPE ragport_http_request_duration_seconds histogram');
    // Process metrics come with an enabled scrape.
    expect(text).toContain('process_resident_memory_bytes');
    // Event-loop delay (perf_hooks.monitorEventLoopDelay): how long a request can wait for the
    // loop, e.g. behind the embedded database's work (issue 14).
    for (const metric of [
      'nodejs_eventloop_lag_p50_seconds',
      'nodejs_eventloop_lag_p99_seconds',
      'nodejs_eventloop_lag_max_seconds',
    ]) {
      expect(text).toMatch(new RegExp(`^${metric} \\d`, 'm'));
    }
  });

  it('is not part of the API: absent from the OpenAPI document', async () => {
    const spec = (await (await t.request('/api/v1/openapi.json')).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(spec.paths).some((p) => p.includes('metrics'))).toBe(false);
  });

  it('counts requests by route pattern, method and status, with their latency', async () => {
    const before = await samples();
    const route = { route: '/api/v1/rag/collections/:collection_name', method: 'GET' };
    for (let i = 0; i < 3; i++) expect((await t.request('/api/v1/rag/collections/nope')).status).toBe(404);
    expect((await t.request('/no/such/route')).status).toBe(404);
    const after = await samples();
    const moved = (name: string, labels: Record<string, string>) =>
      metricValue(after, name, labels) - metricValue(before, name, labels);
    expect(moved('ragport_http_requests_total', { ...route, status: '404' })).toBe(3);
    expect(moved('ragport_http_request_duration_seconds_count', route)).toBe(3);
    expect(moved('ragport_http_request_duration_seconds_sum', route)).toBeGreaterThan(0);
    expect(moved('ragport_http_requests_total', { route: 'unmatched', status: '404' })).toBe(1);
  });

  it('counts what is answered before any route runs: a malformed path (400), headers too large (431)', async () => {
    const before = await samples();
    expect((await t.request('/api/v1/rag/documents/%E0%A4%A')).status).toBe(400);
    const { port } = new URL(t.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), '127.0.0.1', () =>
        socket.write(`GET /api/v1/models HTTP/1.1\r\nHost: x\r\nX-Padding: ${'a'.repeat(20_000)}\r\n\r\n`),
      );
      let received = '';
      socket.on('data', (piece: Buffer) => (received += piece.toString()));
      socket.on('end', () => resolve(received));
      socket.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 431 /);
    const after = await samples();
    const moved = (labels: Record<string, string>) =>
      metricValue(after, 'ragport_http_requests_total', labels) -
      metricValue(before, 'ragport_http_requests_total', labels);
    // Counted nowhere before.
    expect(moved({ route: 'unmatched', method: 'GET', status: '400' })).toBe(1);
    expect(moved({ route: 'unmatched', method: 'GET', status: '431' })).toBe(1);
  });

  it('reports how long statements waited for the embedded database, by priority (none on a server)', async () => {
    const before = await samples();
    for (let i = 0; i < 3; i++) expect((await t.request('/api/v1/rag/collections')).status).toBe(200);
    const after = await samples();
    const count = (s: Sample[]) => metricValue(s, 'ragport_database_wait_seconds_count', { priority: 'interactive' });
    if (t.database.kind === 'pglite') {
      // Each request's statements (its key from memory, the list, its counts) passed the gate.
      expect(count(after) - count(before)).toBeGreaterThanOrEqual(3);
      expect(metricValue(after, 'ragport_database_wait_seconds_bucket', { priority: 'interactive', le: '+Inf' })).toBe(
        count(after),
      );
    } else {
      expect(after.some((x) => x.name.startsWith('ragport_database_wait_seconds'))).toBe(false);
    }
  });

  it('counts a streamed completion once, when the stream ends', async () => {
    const labels = { route: '/api/v1/chat/completions', method: 'POST', status: '200' };
    const before = metricValue(await samples(), 'ragport_http_requests_total', labels);
    const response = await t.request('/api/v1/chat/completions', {
      method: 'POST',
      json: { model: 'mock-chat', messages: [{ role: 'user', content: 'hi' }], stream: true },
    });
    expect(await response.text()).toMatch(/data: \[DONE\]\n\n$/);
    await expect.poll(async () => metricValue(await samples(), 'ragport_http_requests_total', labels)).toBe(before + 1);
  });

  it('counts rate-limit (429) and quota (403) refusals', async () => {
    const limited = await t.createKey({
      name: 'limited',
      scopes: ['read'],
      tier: 'enterprise',
      rate_limits: { requests_per_minute: 2 },
    });
    const quota = await t.createKey({ name: 'quota', scopes: ['read'], quota: { requests_per_day: 1 } });
    const before = await samples();
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await t.request('/api/v1/models', { key: limited.key })).status);
    for (let i = 0; i < 2; i++) statuses.push((await t.request('/api/v1/models', { key: quota.key })).status);
    expect(statuses).toEqual([200, 200, 429, 200, 403]);
    const after = await samples();
    const moved = (reason: string) =>
      metricValue(after, 'ragport_rate_limit_rejections_total', { reason }) -
      metricValue(before, 'ragport_rate_limit_rejections_total', { reason });
    expect(moved('rate_limit')).toBe(1);
    expect(moved('quota')).toBe(1);
  });

  it('counts every failed upstream attempt by provider, kind and status', async () => {
    const labels = { provider: 'mock', kind: 'status', status: '500' };
    const before = metricValue(await samples(), 'ragport_upstream_errors_total', labels);
    mock.inject({ kind: 'status', status: 500 }, 2);
    const response = await t.request('/api/v1/chat/completions', {
      method: 'POST',
      json: { model: 'mock-chat', messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(response.status).toBe(502);
    // The first attempt and its one retry.
    expect(metricValue(await samples(), 'ragport_upstream_errors_total', labels)).toBe(before + 2);
  });

  it('counts texts and tokens embedded, interactive and bulk, and the ingestion jobs', async () => {
    const before = await samples();
    const response = await t.request('/api/v1/embeddings', {
      method: 'POST',
      json: { model: 'text-embedding-3-small', input: ['metrics are counters', 'and histograms'] },
    });
    expect(response.status).toBe(200);
    const { usage } = (await response.json()) as { usage: { prompt_tokens: number } };
    await createCollection(t, 'metered');
    const upload = await t.request('/api/v1/rag/collections/metered/documents', {
      method: 'POST',
      json: { name: 'm.txt', content: 'Prometheus scrapes ragport. '.repeat(100) },
    });
    const doc = await waitForDocument(t, ((await upload.json()) as { id: string }).id);
    expect(doc.status).toBe('processed');
    const after = await samples();
    const moved = (name: string, labels: Record<string, string>) =>
      metricValue(after, name, labels) - metricValue(before, name, labels);
    const model = { model: 'sentence-transformers/all-MiniLM-L6-v2', provider: 'local' };
    expect(moved('ragport_embedding_texts_total', { ...model, priority: 'interactive' })).toBe(2);
    expect(moved('ragport_embedding_tokens_total', { ...model, priority: 'interactive' })).toBe(usage.prompt_tokens);
    expect(moved('ragport_embedding_texts_total', { ...model, priority: 'bulk' })).toBe(doc.chunk_count);
    expect(moved('ragport_embedding_tokens_total', { ...model, priority: 'bulk' })).toBeGreaterThan(doc.chunk_count);
    expect(moved('ragport_ingestion_jobs_total', { outcome: 'processed' })).toBe(1);
    expect(moved('ragport_ingestion_job_duration_seconds_count', { outcome: 'processed' })).toBe(1);
  });
});

describe('ingestion queue depth', () => {
  let t: TestApp;
  beforeAll(async () => {
    // No in-process worker: uploads stay queued.
    t = await startTestApp({ config: { metrics: { token, port: undefined }, ingestionConcurrency: 0 } });
    await createCollection(t, 'queued');
  });
  afterAll(() => t.close());

  const depth = (samples: Sample[], state: string) => metricValue(samples, 'ragport_ingestion_queue_jobs', { state });

  it('is read from the database at each scrape, by state', async () => {
    const before = await scrape(`${t.url}/metrics`, token);
    expect(['ready', 'delayed', 'running', 'stalled'].map((s) => depth(before, s))).toEqual([0, 0, 0, 0]);
    for (const name of ['a.txt', 'b.txt']) {
      const r = await t.request('/api/v1/rag/collections/queued/documents', {
        method: 'POST',
        json: { name, content: `Waiting in the queue: ${name}` },
      });
      expect(r.status).toBe(202);
    }
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    const after = await scrape(`${t.url}/metrics`, token);
    expect(depth(after, 'ready')).toBe(2);
    // Read in the same scrape as the depth: it said the previous scrape's age (0 here, no job
    // then) beside this one's depth.
    expect(metricValue(after, 'ragport_ingestion_queue_oldest_ready_seconds')).toBeGreaterThanOrEqual(1);
    const later = await scrape(`${t.url}/metrics`, token);
    expect(metricValue(later, 'ragport_ingestion_queue_oldest_ready_seconds')).toBeGreaterThanOrEqual(
      metricValue(after, 'ragport_ingestion_queue_oldest_ready_seconds'),
    );
  });
});

describe('without METRICS_TOKEN', () => {
  it('there is no /metrics: 404 like any unknown route', async () => {
    const t = await startTestApp();
    try {
      const response = await fetch(`${t.url}/metrics`);
      expect(response.status).toBe(404);
    } finally {
      await t.close();
    }
  });
});

describe('the metrics port (METRICS_PORT, the standalone worker)', () => {
  it('without METRICS_TOKEN serves only /healthz (the worker container healthcheck)', async () => {
    const metrics = createMetrics({ processMetrics: false });
    const server = await startMetricsServer({
      host: '127.0.0.1',
      port: 0,
      token: undefined,
      metrics,
      logger: pino({ level: 'silent' }),
    });
    try {
      expect((await fetch(`http://127.0.0.1:${server.port}/healthz`)).status).toBe(200);
      expect((await fetch(`http://127.0.0.1:${server.port}/metrics`)).status).toBe(404);
    } finally {
      await server.close();
    }
  });

  it('serves /metrics with the token and /healthz without; nothing else', async () => {
    const metrics = createMetrics({ processMetrics: false });
    metrics.ingestion.jobEnded('processed', 0.5);
    const server = await startMetricsServer({
      host: '127.0.0.1',
      port: 0,
      token,
      metrics,
      logger: pino({ level: 'silent' }),
    });
    const base = `http://127.0.0.1:${server.port}`;
    try {
      expect((await fetch(`${base}/metrics`)).status).toBe(401);
      const samples = parseMetrics(
        await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${token}` } })).text(),
      );
      expect(metricValue(samples, 'ragport_ingestion_jobs_total', { outcome: 'processed' })).toBe(1);
      expect(
        metricValue(samples, 'ragport_ingestion_job_duration_seconds_bucket', { outcome: 'processed', le: '0.5' }),
      ).toBe(1);
      expect(await (await fetch(`${base}/healthz`)).json()).toEqual({ status: 'ok' });
      expect((await fetch(`${base}/api/v1/keys`)).status).toBe(404);
      // HEAD as on the main port: the status and headers, no body (it was a 404 here).
      const head = await fetch(`${base}/metrics`, { method: 'HEAD', headers: { authorization: `Bearer ${token}` } });
      expect(head.status).toBe(200);
      expect(head.headers.get('content-type')).toBe(metrics.contentType);
      expect(await head.text()).toBe('');
      expect((await fetch(`${base}/healthz`, { method: 'HEAD' })).status).toBe(200);
      expect((await fetch(`${base}/metrics`, { method: 'POST' })).status).toBe(404);
    } finally {
      await server.close();
    }
  });
});
