import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

/**
 * Upstreams that answer 200 with something that is not what OpenAI's API sends: a broken
 * provider, a proxy's HTML page, a server that forgets its usage arithmetic. None of it may reach
 * the client as a success, end as a 500, or break what other requests rely on.
 */
let mock: MockUpstream;
let t: TestApp;
let client: OpenAI;

beforeAll(async () => {
  mock = await startMockUpstream({ models: ['mock-chat', 'mock-embed'], completionTokens: 3, embeddingDimensions: 4 });
  t = await startTestApp({
    gateway: {
      providers: [{ name: 'mock', base_url: mock.url, models: ['mock-chat'], embedding_models: ['mock-embed'] }],
      retry: { max_retries: 1, base_delay_ms: 1, max_delay_ms: 5 },
      circuit_breaker: { failure_threshold: 1_000 },
    },
    // Only explicit flushes write usage: the tests decide when.
    config: { usageFlushIntervalMs: 3_600_000 },
  });
  client = new OpenAI({ apiKey: t.adminKey, baseURL: `${t.url}/api/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await t.close();
  await mock.close();
});
beforeEach(() => mock.reset());

const messages = [{ role: 'user', content: 'one two' }];
const chat = (extra: Record<string, unknown> = {}, key?: string) =>
  t.request('/api/v1/chat/completions', {
    method: 'POST',
    json: { model: 'mock-chat', messages, ...extra },
    ...(key === undefined ? {} : { key }),
  });
const calls = () => mock.count('/v1/chat/completions');

const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
  JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'mock-chat', choices, ...extra });
const delta = (content: string, finish: string | null = null) =>
  chunk([{ index: 0, delta: { content }, finish_reason: finish }]);
const sse = (...events: string[]) => ({
  kind: 'body' as const,
  contentType: 'text/event-stream',
  body: events.map((e) => `data: ${e}\n\n`).join(''),
});
const errorFrame =
  /data: \{"error":\{"message":"[^"]+","type":"api_error","code":"upstream_error"\}\}\n\ndata: \[DONE\]\n\n$/;

describe('a streamed request whose upstream answers 200 without a stream', () => {
  it('a JSON completion or an HTML page: retried, then 502 as JSON, never an empty stream', async () => {
    const completion = JSON.stringify({
      id: 'x',
      object: 'chat.completion',
      created: 1,
      model: 'mock-chat',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
    });
    for (const fault of [
      { kind: 'body' as const, body: completion },
      { kind: 'body' as const, body: '<html><body>Welcome</body></html>', contentType: 'text/html' },
      sse('[DONE]'),
    ]) {
      mock.reset();
      mock.inject(fault, 2);
      const response = await chat({ stream: true });
      expect(response.status).toBe(502);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await response.json()).toEqual({
        error: { message: 'Provider mock sent an invalid response', type: 'api_error', code: 'upstream_error' },
      });
      expect(calls()).toBe(2);
    }
  });

  it('is invisible to the client when a retry succeeds', async () => {
    mock.inject({ kind: 'body', body: '{}' });
    const response = await chat({ stream: true });
    expect(response.status).toBe(200);
    const body = await response.text();
    expect(body).toContain('"finish_reason":"stop"');
    expect(body).not.toMatch(errorFrame);
    expect(calls()).toBe(2);
  });
});

describe('streams that end or misbehave after their first event', () => {
  it('cut short (no finish_reason, no [DONE]): the client gets an error event, not a complete answer', async () => {
    mock.inject(sse(delta('Hel'), delta('lo')));
    const body = await (await chat({ stream: true })).text();
    expect(body).toContain('"content":"lo"');
    expect(body).toMatch(errorFrame);
    expect(calls()).toBe(1);

    mock.inject(sse(delta('Hel'), delta('lo')));
    const stream = await client.chat.completions.create({
      model: 'mock-chat',
      messages: [{ role: 'user', content: 'x' }],
      stream: true,
    });
    const consume = async () => {
      for await (const c of stream) expect(c.object).toBe('chat.completion.chunk');
    };
    await expect(consume()).rejects.toBeInstanceOf(OpenAI.APIError);
  });

  it('a finish_reason without [DONE] is a complete answer; so is [DONE] without a finish_reason', async () => {
    mock.inject(sse(delta('Hi', 'stop')));
    const finished = await (await chat({ stream: true })).text();
    expect(finished).not.toMatch(errorFrame);
    expect(finished.endsWith('data: [DONE]\n\n')).toBe(true);

    mock.inject(sse(delta('Hi'), '[DONE]'));
    expect(await (await chat({ stream: true })).text()).not.toMatch(errorFrame);
  });

  it('n > 1: the stream is complete only once every choice gave its finish_reason', async () => {
    const two = (index: number, content: string, finish: string | null = null) =>
      chunk([{ index, delta: { content }, finish_reason: finish }]);
    // Choice 0 finished, choice 1 cut off mid-answer: not a complete answer.
    mock.inject(sse(two(0, 'A', 'stop'), two(1, 'B'), two(1, 'b')));
    const cut = await (await chat({ stream: true, n: 2 })).text();
    expect(cut).toContain('"content":"b"');
    expect(cut).toMatch(errorFrame);

    mock.inject(sse(two(0, 'A'), two(1, 'B'), two(1, 'b', 'length'), two(0, 'a', 'stop')));
    expect(await (await chat({ stream: true, n: 2 })).text()).not.toMatch(errorFrame);
  });

  it("an upstream's in-band error keeps its message; one that blames the request is the client's 400, not retried", async () => {
    const blamed = JSON.stringify({
      error: {
        message: "This model's maximum context length is 8192 tokens",
        type: 'invalid_request_error',
        code: 'context_length_exceeded',
        param: 'messages',
      },
    });
    // As the first event: nothing was sent yet, so it is the answer's status.
    mock.inject(sse(blamed), 2);
    const first = await chat({ stream: true });
    expect(first.status).toBe(400);
    expect(await first.json()).toEqual({
      error: {
        message: "This model's maximum context length is 8192 tokens",
        type: 'invalid_request_error',
        code: 'context_length_exceeded',
        param: 'messages',
      },
    });
    expect(calls()).toBe(1);

    // OpenRouter puts the HTTP status in a numeric code.
    mock.reset();
    mock.inject(sse(JSON.stringify({ error: { message: 'No endpoints found', code: 404 } })), 2);
    const numbered = await chat({ stream: true });
    expect(numbered.status).toBe(404);
    expect(((await numbered.json()) as { error: { message: string } }).error.message).toBe('No endpoints found');
    expect(calls()).toBe(1);

    // A server error as the first event is retried like a 5xx; the message says what the upstream said.
    mock.reset();
    const server = JSON.stringify({ error: { message: 'The server had an error', code: 'server_error' } });
    mock.inject(sse(server), 2);
    const failed = await chat({ stream: true });
    expect(failed.status).toBe(502);
    expect(await failed.json()).toEqual({
      error: {
        message: 'Provider mock reported an error: The server had an error',
        type: 'api_error',
        code: 'upstream_error',
      },
    });
    expect(calls()).toBe(2);

    // After the first event: in-band to the client, with the upstream's message and code.
    mock.reset();
    mock.inject(sse(delta('Hel'), blamed));
    const late = await (await chat({ stream: true })).text();
    expect(late).toContain('"content":"Hel"');
    const frames = late.split('\n\n').filter(Boolean);
    expect(frames.at(-1)).toBe('data: [DONE]');
    expect(JSON.parse((frames.at(-2) as string).slice(6))).toEqual({
      error: {
        message: "This model's maximum context length is 8192 tokens",
        type: 'invalid_request_error',
        code: 'context_length_exceeded',
        param: 'messages',
      },
    });
  });

  it('the same error in a plain 200 answer means what it means in a stream: a 400 here, not retried', async () => {
    const blamed = {
      error: {
        message: "This model's maximum context length is 8192 tokens",
        type: 'invalid_request_error',
        code: 'context_length_exceeded',
        param: 'messages',
      },
    };
    // Before, 502 `sent an invalid response` (no choices), retried, where the stream gave the 400.
    mock.inject({ kind: 'body', contentType: 'application/json', body: JSON.stringify(blamed) }, 2);
    const response = await chat();
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual(blamed);
    expect(calls()).toBe(1);
    mock.reset();
    const server = { error: { message: 'The server had an error', code: 'server_error' } };
    mock.inject({ kind: 'body', contentType: 'application/json', body: JSON.stringify(server) }, 2);
    const failed = await chat();
    expect(failed.status).toBe(502);
    expect(((await failed.json()) as { error: { message: string } }).error.message).toBe(
      'Provider mock reported an error: The server had an error',
    );
  });

  it('an event that is JSON but not an object (null, an array, a number) is a malformed event', async () => {
    for (const odd of ['null', '[1,2]', '42']) {
      mock.reset();
      mock.inject(sse(delta('a'), odd, delta('b', 'stop'), '[DONE]'));
      const body = await (await chat({ stream: true })).text();
      expect(body).toMatch(errorFrame);
      expect(body).not.toContain('"content":"b"');
    }
  });

  it('an event whose JSON spans several data: lines is relayed on one line, and the official client reads it', async () => {
    const event = delta('multi', 'stop').replace(',"created"', ',\n"created"').replace(',"choices"', ',\r\n"choices"');
    const lines = event.split(/\r?\n/).map((line) => `data: ${line}\n`);
    const split = {
      kind: 'body' as const,
      contentType: 'text/event-stream',
      body: `${lines.join('')}\ndata: [DONE]\n\n`,
    };
    mock.inject(split);
    const body = await (await chat({ stream: true })).text();
    const frames = body.split('\n\n').filter(Boolean);
    expect(frames[0]).toMatch(/^data: \{[^\n\r]*\}$/);
    expect(JSON.parse((frames[0] as string).slice(6))).toEqual(JSON.parse(delta('multi', 'stop')));

    mock.inject(split);
    const stream = await client.chat.completions.create({
      model: 'mock-chat',
      messages: [{ role: 'user', content: 'x' }],
      stream: true,
    });
    const texts: string[] = [];
    for await (const c of stream) texts.push(c.choices[0]?.delta.content ?? '');
    expect(texts.join('')).toBe('multi');
  });
});

describe('a non-streamed answer that is JSON but not an object', () => {
  it('null, an array, a string: 502 "invalid response", retried as a malformed answer, not "unreachable"', async () => {
    for (const body of ['null', '[]', '"text"']) {
      mock.reset();
      mock.inject({ kind: 'body', body }, 2);
      const response = await chat();
      expect(response.status).toBe(502);
      expect(await response.json()).toEqual({
        error: { message: 'Provider mock sent an invalid response', type: 'api_error', code: 'upstream_error' },
      });
      expect(calls()).toBe(2);
    }
  });
});

interface UsageRow {
  model: string;
  requests: number;
  prompt_tokens: string | number;
  completion_tokens: string | number;
}
const usageOf = async (keyId: string) =>
  (
    await queryRows<UsageRow>(
      t.database.db,
      sql`select model, requests, prompt_tokens, completion_tokens from usage_daily where key_id = ${keyId}`,
    )
  ).map((r) => [r.model, r.requests, Number(r.prompt_tokens), Number(r.completion_tokens)]);

describe("an upstream's usage that is not token counts", () => {
  it("fractional, negative or huge counts are replaced by ragport's own; other keys' usage is still written", async () => {
    const odd = [
      { prompt_tokens: 10, completion_tokens: 1.5, total_tokens: 11.5 },
      { prompt_tokens: -1000, completion_tokens: -1000, total_tokens: -2000 },
      { prompt_tokens: 1e300, completion_tokens: 2, total_tokens: 1e300 },
      { prompt_tokens: '7', completion_tokens: 2, total_tokens: 9 },
    ];
    const keys = [];
    for (const usage of odd) {
      const key = await t.createKey({ name: 'odd-usage', scopes: ['chat'] });
      keys.push(key);
      const completion = {
        id: 'x',
        object: 'chat.completion',
        created: 1,
        model: 'mock-chat',
        choices: [{ index: 0, message: { role: 'assistant', content: 'w0 w1 w2' }, finish_reason: 'stop' }],
        usage,
      };
      mock.inject({ kind: 'body', body: JSON.stringify(completion) });
      expect((await chat({}, key.key)).status).toBe(200);
    }
    // A stream's usage chunk too.
    const streamed = await t.createKey({ name: 'odd-stream', scopes: ['chat'] });
    mock.inject(
      sse(delta('w0 w1 w2', 'stop'), chunk([], { usage: { prompt_tokens: 3, completion_tokens: -5 } }), '[DONE]'),
    );
    await (await chat({ stream: true }, streamed.key)).text();
    const fine = await t.createKey({ name: 'fine-usage', scopes: ['chat'] });
    expect((await chat({}, fine.key)).status).toBe(200);

    await t.app.usage.flush();
    // user + "one two" (2) + 3 per message + 3 priming = 9; the completion "w0 w1 w2" as counted.
    const own = await usageOf(keys[0]?.id as string);
    expect(own).toHaveLength(1);
    const [, , prompt, completion] = own[0] as number[];
    expect(prompt).toBe(9);
    expect(completion).toBeGreaterThan(0);
    for (const key of [...keys, streamed])
      expect(await usageOf(key.id)).toEqual([['mock-chat', 1, prompt, completion]]);
    // The mock's own count for the well-behaved call: 2 words in, 3 tokens out.
    expect(await usageOf(fine.id)).toEqual([['mock-chat', 1, 2, 3]]);
  });
});

describe('malformed embeddings from an upstream', () => {
  const embed = (input: string[]) =>
    t.request('/api/v1/embeddings', { method: 'POST', json: { model: 'mock-embed', input } });
  const item = (index: unknown, embedding: unknown) => ({ object: 'embedding', index, embedding });
  const answer = (...data: unknown[]) => ({
    kind: 'body' as const,
    body: JSON.stringify({ object: 'list', model: 'mock-embed', data, usage: { prompt_tokens: 1, total_tokens: 1 } }),
  });
  // The model's dimensions are probed once, on first use: before any fault is injected.
  beforeAll(async () => expect((await embed(['warm'])).status).toBe(200));

  it('a null or non-numeric vector, an index out of range or repeated, vectors of different lengths: 502, not 500', async () => {
    const cases: [string[], ReturnType<typeof answer>][] = [
      [['a'], answer(item(0, null))],
      [['a'], answer(item(0, ['x', 'y', 'z', 'w']))],
      [['a'], answer(item(0, [1, 2, 3, null]))],
      [['a'], answer(item(0, 'AAA='))],
      [['a'], answer(item(5, [1, 2, 3, 4]))],
      [['a', 'b'], answer(item(0, [1, 2, 3, 4]), item(0, [1, 2, 3, 4]))],
      [['a', 'b'], answer(item(0, [1, 2, 3, 4]), item(1, [1, 2, 3]))],
      [['a'], answer(null)],
    ];
    for (const [input, fault] of cases) {
      mock.reset();
      mock.inject(fault, 2);
      const response = await embed(input);
      expect(response.status).toBe(502);
      expect(await response.json()).toEqual({
        error: {
          message: "Embedding model 'mock-embed': Provider mock sent an invalid response",
          type: 'api_error',
          code: 'upstream_error',
        },
      });
      expect(mock.count('/v1/embeddings')).toBe(2);
    }
  });

  it('a well-formed answer with indexes out of order is put in input order', async () => {
    mock.inject(answer(item(1, [0, 1, 0, 0]), item(0, [1, 0, 0, 0])));
    const response = await embed(['a', 'b']);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { data: { index: number; embedding: number[] }[] };
    expect(body.data.map((d) => d.embedding)).toEqual([
      [1, 0, 0, 0],
      [0, 1, 0, 0],
    ]);
  });
});

describe("an upstream's 4xx without OpenAI's error shape", () => {
  it("FastAPI's detail, a validation list, an HTML page: the message is the readable part", async () => {
    const cases: [number, string, string, string][] = [
      [404, 'application/json', JSON.stringify({ detail: 'Not Found' }), 'Not Found'],
      [
        422,
        'application/json',
        JSON.stringify({ detail: [{ loc: ['body', 'messages', 0, 'role'], msg: 'field required', type: 'missing' }] }),
        'body.messages.0.role: field required',
      ],
      [400, 'application/json', JSON.stringify({ message: 'context too long' }), 'context too long'],
      [
        400,
        'text/html',
        '<html><head><title>x</title></head><body><h1>400 Bad Request</h1></body></html>',
        '400 Bad Request',
      ],
      [400, 'text/plain', '', 'HTTP 400'],
    ];
    for (const [status, contentType, body, message] of cases) {
      mock.reset();
      mock.inject({ kind: 'body', status, contentType, body });
      const response = await chat();
      expect(response.status).toBe(status);
      expect(((await response.json()) as { error: { message: string } }).error.message).toBe(message);
    }
  });
});
