import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

let mock: MockUpstream;
let t: TestApp;

beforeAll(async () => {
  mock = await startMockUpstream({ completionTokens: 3 });
  t = await startTestApp({
    gateway: {
      providers: [{ name: 'mock', base_url: mock.url, models: ['mock-chat'], max_retries: 2 }],
      retry: { base_delay_ms: 1, max_delay_ms: 5 },
    },
  });
});
afterAll(async () => {
  await t.close();
  await mock.close();
});
beforeEach(() => {
  mock.reset();
  mock.options.tokensPerSecond = 0;
  mock.options.usage = true;
});

const stream = (extra: Record<string, unknown> = {}, init: RequestInit = {}) =>
  t.request('/api/v1/chat/completions', {
    method: 'POST',
    json: { model: 'mock-chat', messages: [{ role: 'user', content: 'one two' }], stream: true, ...extra },
    ...init,
  });

const usageFrame = /data: \{[^\n]*"choices":\[\],"usage":\{[^\n]*\}\n\n/;
const errorFrame = (code: string) =>
  new RegExp(
    `data: \\{"error":\\{"message":"[^"]+","type":"api_error","code":"${code}"\\}\\}\\n\\ndata: \\[DONE\\]\\n\\n$`,
  );

describe('streamed chat completions', () => {
  it('relays the upstream events byte for byte, with the usage chunk the client asked for', async () => {
    const response = await stream({ stream_options: { include_usage: true } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const requestId = response.headers.get('x-request-id');
    expect(requestId).toMatch(/^req_/);
    const body = await response.text();
    // The stream is written to the socket directly; the request is still logged once.
    await mock.waitFor(() => t.logs.some((l) => l.request_id === requestId && l.msg === 'request'));
    expect(t.logs.find((l) => l.request_id === requestId && l.msg === 'request')).toMatchObject({
      status: 200,
      url: '/api/v1/chat/completions',
    });
    const upstream = mock.requests[0];
    expect(upstream?.body?.stream_options).toEqual({ include_usage: true });
    expect(body).toBe(upstream?.sent);
    expect(body).toMatch(usageFrame);
    const frames = body.split('\n\n');
    expect(frames.slice(-2)).toEqual(['data: [DONE]', '']);
    expect(frames).toHaveLength(3 + 1 + 1 + 2);
  });

  it('asks the upstream for usage anyway and drops that chunk when the client did not ask', async () => {
    const response = await stream();
    const body = await response.text();
    const upstream = mock.requests[0];
    expect(upstream?.body?.stream_options).toEqual({ include_usage: true });
    expect(upstream?.sent).toMatch(usageFrame);
    expect(body).toBe(upstream?.sent.replace(usageFrame, ''));
    expect(body).not.toContain('"usage"');
  });

  it('counts usage with the tokenizer when the upstream gives none, and still sends the usage chunk', async () => {
    mock.options.usage = false;
    const body = await (await stream({ stream_options: { include_usage: true } })).text();
    const frames = body.split('\n\n').filter(Boolean);
    expect(frames.at(-1)).toBe('data: [DONE]');
    const last = JSON.parse((frames.at(-2) as string).slice(6)) as Record<string, unknown>;
    // "one two" is 2 tokens + the role + 3 per message + 3 priming; "w0 w1 w2 " is 6 tokens in o200k.
    expect(last).toMatchObject({ object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 9 } });
    expect((last.usage as { completion_tokens: number }).completion_tokens).toBeGreaterThan(0);
  });

  it('reports a connection reset mid-stream in-band, then [DONE], without retrying', async () => {
    mock.inject({ kind: 'reset-mid-stream', afterChunks: 2 });
    const response = await stream();
    expect(response.status).toBe(200);
    const body = await response.text();
    expect(body.startsWith(mock.requests[0]?.sent ?? 'x')).toBe(true);
    expect(body).toMatch(errorFrame('upstream_error'));
    expect(body.split('\n\n').filter((f) => f.includes('chat.completion.chunk'))).toHaveLength(2);
    expect(mock.count('/v1/chat/completions')).toBe(1);
  });

  it('reports a malformed event and an upstream error event in-band', async () => {
    mock.inject({ kind: 'malformed-sse', afterChunks: 1 });
    const malformed = await (await stream()).text();
    expect(malformed).toMatch(errorFrame('upstream_error'));
    expect(malformed).not.toContain('broken');

    mock.inject({ kind: 'error-event', afterChunks: 2, message: 'overloaded' });
    const failed = await (await stream()).text();
    expect(failed).toMatch(errorFrame('upstream_error'));
    expect(mock.count('/v1/chat/completions')).toBe(2);
  });

  it('retries before the first byte: 500, reset and malformed first events are invisible to the client', async () => {
    mock.inject({ kind: 'status', status: 500 });
    mock.inject({ kind: 'malformed-sse', afterChunks: 0 });
    const response = await stream();
    expect(response.status).toBe(200);
    const body = await response.text();
    expect(mock.count('/v1/chat/completions')).toBe(3);
    expect(body).toBe(mock.requests[2]?.sent.replace(usageFrame, ''));
  });

  it('fails with a JSON error, not a stream, when every attempt fails before the first byte', async () => {
    mock.inject({ kind: 'status', status: 503 }, 3);
    const response = await stream();
    expect(response.status).toBe(502);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await response.json()).toEqual({
      error: { message: 'Provider mock answered HTTP 503', type: 'api_error', code: 'upstream_error' },
    });
    expect(mock.count('/v1/chat/completions')).toBe(3);
  });

  it('aborts the upstream request at once when the client disconnects mid-stream', async () => {
    mock.options.tokensPerSecond = 5;
    mock.options.completionTokens = 50;
    const controller = new AbortController();
    const response = await stream({}, { signal: controller.signal });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toMatch(/^data: /);
    controller.abort();
    await mock.waitFor(() => mock.requests[0]?.aborted === true, 2_000);
    expect(mock.requests[0]?.finished).toBe(false);
    mock.options.completionTokens = 3;
  });

  it('aborts a non-streamed upstream request when the client disconnects', async () => {
    mock.inject({ kind: 'hang' });
    const controller = new AbortController();
    const pending = t
      .request('/api/v1/chat/completions', {
        method: 'POST',
        json: { model: 'mock-chat', messages: [{ role: 'user', content: 'x' }] },
        signal: controller.signal,
      })
      .catch((error: unknown) => error);
    await mock.waitFor(() => mock.requests.length === 1);
    controller.abort();
    await pending;
    await mock.waitFor(() => mock.requests[0]?.aborted === true, 2_000);
  });
});
