import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

let mock: MockUpstream;
let t: TestApp;
let client: OpenAI;

beforeAll(async () => {
  mock = await startMockUpstream();
  t = await startTestApp({
    gateway: {
      providers: [
        { name: 'mock', base_url: mock.url, models: ['mock-chat'], embedding_models: ['mock-embed'], timeout_ms: 300 },
      ],
      retry: { max_retries: 2, base_delay_ms: 1, max_delay_ms: 1_000 },
      circuit_breaker: { failure_threshold: 1_000 },
    },
  });
  client = new OpenAI({ apiKey: t.adminKey, baseURL: `${t.url}/api/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await t.close();
  await mock.close();
});
beforeEach(() => mock.reset());

const chat = (json: Record<string, unknown>, key?: string) =>
  t.request('/api/v1/chat/completions', {
    method: 'POST',
    json: { model: 'mock-chat', messages: [{ role: 'user', content: 'hi' }], ...json },
    ...(key === undefined ? {} : { key }),
  });
const calls = () => mock.count('/v1/chat/completions');

describe('chat completion errors', () => {
  it('unknown model: 404 model_not_found before any upstream call', async () => {
    const response = await chat({ model: 'nope' });
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({
      error: {
        message: "The model 'nope' does not exist",
        type: 'not_found_error',
        code: 'model_not_found',
        param: 'model',
      },
    });
    expect(calls()).toBe(0);
  });

  it.each([
    [{ temperature: 2.5 }, 'temperature'],
    [{ temperature: -0.1 }, 'temperature'],
    [{ max_tokens: 0 }, 'max_tokens'],
    [{ max_tokens: 1.5 }, 'max_tokens'],
    [{ messages: [] }, 'messages'],
    [{ messages: [{ role: 'robot', content: 'x' }] }, 'messages.0.role'],
    [{ stream: 'yes' }, 'stream'],
  ])('validates %j: 400 invalid_request_error on %s', async (fields, param) => {
    const response = await chat(fields);
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({
      error: { type: 'invalid_request_error', code: 'invalid_value', param },
    });
    expect(calls()).toBe(0);
  });

  it('accepts temperature 0 and 2, tool and function roles and content arrays', async () => {
    for (const temperature of [0, 2]) expect((await chat({ temperature })).status).toBe(200);
    const messages = [
      { role: 'developer', content: 'x' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look' },
          { type: 'image_url', image_url: { url: 'data:,' } },
        ],
      },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: '42' },
      { role: 'function', name: 'f', content: '42' },
    ];
    expect((await chat({ messages })).status).toBe(200);
    expect(mock.requests.at(-1)?.body?.messages).toEqual(messages);
  });

  it('missing model or messages: 400 missing_field', async () => {
    const response = await t.request('/api/v1/chat/completions', { method: 'POST', json: { model: 'mock-chat' } });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { code: 'missing_field', param: 'messages' } });
  });

  it('upstream 400: status, message and code passed through, no retry', async () => {
    mock.inject({ kind: 'status', status: 400, message: 'context too long', code: 'context_length_exceeded' });
    const response = await chat({});
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      error: { message: 'context too long', type: 'invalid_request_error', code: 'context_length_exceeded' },
    });
    expect(calls()).toBe(1);
  });

  it('upstream 422 without a code: passed through with invalid_value', async () => {
    mock.inject({ kind: 'status', status: 422, message: 'bad schema' });
    const response = await chat({});
    expect(response.status).toBe(422);
    expect(await response.json()).toEqual({
      error: { message: 'bad schema', type: 'invalid_request_error', code: 'invalid_value' },
    });
  });

  it('upstream 429: retried (Retry-After honoured), then passed through with Retry-After', async () => {
    mock.inject({ kind: 'status', status: 429, message: 'slow down', retryAfter: 0 }, 3);
    const response = await chat({});
    expect(response.status).toBe(429);
    expect(await response.json()).toEqual({
      error: { message: 'slow down', type: 'rate_limit_error', code: 'rate_limit_exceeded' },
    });
    expect(calls()).toBe(3);
    expect(response.headers.get('retry-after')).toBe('1');
  });

  it('upstream 429 then success: the client sees only the success', async () => {
    mock.inject({ kind: 'status', status: 429, retryAfter: 0 });
    expect((await chat({})).status).toBe(200);
    expect(calls()).toBe(2);
  });

  it('upstream 500, 502, 503: retried, then 502 upstream_error without the upstream message', async () => {
    mock.inject({ kind: 'status', status: 500, message: 'stack trace at line 3' }, 3);
    const response = await chat({});
    expect(response.status).toBe(502);
    const body = JSON.stringify(await response.json());
    expect(body).toBe(
      '{"error":{"message":"Provider mock answered HTTP 500","type":"api_error","code":"upstream_error"}}',
    );
    expect(calls()).toBe(3);
  });

  it('upstream 401 (its own key refused): 502, not the client 401', async () => {
    mock.inject({ kind: 'status', status: 401, message: 'bad key' });
    const response = await chat({});
    expect(response.status).toBe(502);
    expect(await response.json()).toMatchObject({ error: { code: 'upstream_error' } });
  });

  it('connection reset: retried, then 502', async () => {
    mock.inject({ kind: 'reset' }, 3);
    const response = await chat({});
    expect(response.status).toBe(502);
    expect(await response.json()).toEqual({
      error: { message: 'Provider mock is unreachable', type: 'api_error', code: 'upstream_error' },
    });
    expect(calls()).toBe(3);
  });

  it('timeout: 504 upstream_timeout, the upstream request abandoned', async () => {
    mock.inject({ kind: 'hang' });
    const response = await chat({});
    expect(response.status).toBe(504);
    expect(await response.json()).toEqual({
      error: { message: 'Provider mock timed out', type: 'api_error', code: 'upstream_timeout' },
    });
    await mock.waitFor(() => mock.requests[0]?.aborted === true);
  });

  it('a non-JSON upstream answer: 502', async () => {
    mock.inject({ kind: 'malformed-sse', afterChunks: 0 }, 3);
    const response = await chat({});
    expect(response.status).toBe(502);
  });

  it('the chat scope is required', async () => {
    const reader = await t.createKey({ name: 'reader', scopes: ['read', 'embeddings'] });
    const response = await chat({}, reader.key);
    expect(response.status).toBe(403);
    expect(await response.json()).toMatchObject({ error: { type: 'permission_error', code: 'insufficient_scope' } });
    expect(calls()).toBe(0);
    const route = t.app.routes.find((r) => r.url === '/api/v1/chat/completions');
    expect(route).toMatchObject({ access: 'chat', family: 'structured', operationId: 'createChatCompletion' });
    expect((await chat({}, 'rpk_invalid')).status).toBe(401);
  });

  it('the official client sees typed exceptions', async () => {
    const messages = [{ role: 'user' as const, content: 'hi' }];
    await expect(client.chat.completions.create({ model: 'nope', messages })).rejects.toBeInstanceOf(
      OpenAI.NotFoundError,
    );
    await expect(
      client.chat.completions.create({ model: 'mock-chat', messages, temperature: 3 }),
    ).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    mock.inject({ kind: 'status', status: 503 }, 3);
    const upstream = await client.chat.completions.create({ model: 'mock-chat', messages }).catch((e: unknown) => e);
    expect(upstream).toBeInstanceOf(OpenAI.InternalServerError);
    expect(upstream).toMatchObject({ status: 502, code: 'upstream_error', type: 'api_error' });
    mock.inject({ kind: 'status', status: 429, retryAfter: 0 }, 3);
    await expect(client.chat.completions.create({ model: 'mock-chat', messages })).rejects.toBeInstanceOf(
      OpenAI.RateLimitError,
    );
    const reader = await t.createKey({ name: 'r2', scopes: ['read'] });
    const limited = new OpenAI({ apiKey: reader.key, baseURL: `${t.url}/api/v1`, maxRetries: 0 });
    await expect(limited.chat.completions.create({ model: 'mock-chat', messages })).rejects.toBeInstanceOf(
      OpenAI.PermissionDeniedError,
    );
    await expect(
      new OpenAI({ apiKey: 'rpk_wrong', baseURL: `${t.url}/api/v1`, maxRetries: 0 }).models.list(),
    ).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it('a mid-stream failure reaches the official client as an APIError', async () => {
    mock.inject({ kind: 'error-event', afterChunks: 1 });
    const stream = await client.chat.completions.create({
      model: 'mock-chat',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    const consume = async () => {
      for await (const chunk of stream) expect(chunk.object).toBe('chat.completion.chunk');
    };
    await expect(consume()).rejects.toBeInstanceOf(OpenAI.APIError);
  });
});
