import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

/** What the official SDK gets through ragport, for what OpenAI's own API sends. */

let mock: MockUpstream;
let t: TestApp;
let client: OpenAI;

// The provider's API key: never to be seen in an answer or the log (see the end).
const SECRET = 'sk-echo-secret-4242-abcdef';

beforeAll(async () => {
  mock = await startMockUpstream({ apiKey: SECRET });
  t = await startTestApp({
    gateway: {
      providers: [{ name: 'mock', base_url: mock.url, apiKey: SECRET, models: ['mock-chat'] }],
      retry: { max_retries: 0, base_delay_ms: 1, max_delay_ms: 10 },
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

const tools = [
  { type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } },
  { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: {} } } },
];
const messages = [{ role: 'user' as const, content: 'Weather and time in Paris?' }];

/** Two parallel tool calls as OpenAI streams them: id and name first, then argument fragments. */
function toolCallStream(): { sse: string; calls: { id: string; name: string; arguments: string }[] } {
  const calls = [
    { id: 'call_a', name: 'get_weather', arguments: '{"location":"Paris, \\"FR\\"","unit":"c"}' },
    { id: 'call_b', name: 'get_time', arguments: '{"tz":"Europe/Paris"}' },
  ];
  const base = { id: 'chatcmpl-tools', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'mock-chat' };
  const chunk = (delta: unknown, finish: string | null = null) => ({
    ...base,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  });
  const chunks: unknown[] = [chunk({ role: 'assistant', content: null })];
  calls.forEach((call, index) => {
    const fn = { name: call.name, arguments: '' };
    chunks.push(chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: fn }] }));
    for (let at = 0; at < call.arguments.length; at += 6) {
      const piece = call.arguments.slice(at, at + 6);
      chunks.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
    }
  });
  chunks.push(chunk({}, 'tool_calls'));
  chunks.push({ ...base, choices: [], usage: { prompt_tokens: 9, completion_tokens: 12, total_tokens: 21 } });
  const sse = `${chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('')}data: [DONE]\n\n`;
  return { sse, calls };
}

describe('the OpenAI SDK through the gateway', () => {
  it('streamed tool calls: every delta relayed as sent, and the stream helper assembles the same calls', async () => {
    const { sse, calls } = toolCallStream();
    const expected = calls.map((c) => ({
      id: c.id,
      type: 'function',
      function: { name: c.name, arguments: c.arguments },
    }));

    mock.inject({ kind: 'body', body: sse, contentType: 'text/event-stream' });
    const stream = await client.chat.completions.create({
      model: 'mock-chat',
      messages,
      tools,
      parallel_tool_calls: true,
      stream: true,
      stream_options: { include_usage: true },
    });
    const received: unknown[] = [];
    for await (const chunk of stream) received.push(chunk);
    const sent = sse
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => JSON.parse(e.slice(6)) as unknown);
    expect(received).toEqual(sent);
    // What ragport sent upstream: the tool fields as given.
    expect(mock.requests[0]?.body).toMatchObject({ tools, parallel_tool_calls: true });

    mock.inject({ kind: 'body', body: sse, contentType: 'text/event-stream' });
    const helper = client.chat.completions.stream({ model: 'mock-chat', messages, tools });
    const done: string[] = [];
    helper.on('tool_calls.function.arguments.done', (e) => done.push(e.arguments));
    const final = await helper.finalChatCompletion();
    expect(final.choices[0]?.finish_reason).toBe('tool_calls');
    expect(final.choices[0]?.message.tool_calls).toEqual(expected);
    expect(done).toEqual(calls.map((c) => c.arguments));
  });

  it("an upstream 400 keeps the field it blamed: the SDK's error.param", async () => {
    const body = JSON.stringify({
      error: {
        message: "Invalid value for 'tool_choice': no function named 'nope' in tools.",
        type: 'invalid_request_error',
        param: 'tool_choice',
        code: 'invalid_value',
      },
    });
    mock.inject({ kind: 'body', status: 400, body });
    const error = await client.chat.completions
      .create({ model: 'mock-chat', messages, tools, tool_choice: { type: 'function', function: { name: 'nope' } } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({
      status: 400,
      param: 'tool_choice',
      code: 'invalid_value',
      type: 'invalid_request_error',
      message: expect.stringContaining("no function named 'nope'") as unknown,
    });
  });
});

// A provider that echoes the Authorization header it refused (`Incorrect API key provided: …`):
// its API key was written to the log in full, and relayed to the client in a 400's message.
describe('the provider key an upstream echoes', () => {
  const echoed = (type: string) =>
    JSON.stringify({ error: { message: `Incorrect API key provided: Bearer ${SECRET}.`, type } });

  it.each([
    ['a 401', 401, 'authentication_error'],
    ['a 500', 500, 'server_error'],
    ['a 400 (relayed to the client)', 400, 'invalid_request_error'],
  ])('the key an upstream echoes in %s is in neither the answer nor the log', async (_, status, type) => {
    mock.inject({ kind: 'body', status, body: echoed(type) });
    const error = (await client.chat.completions.create({ model: 'mock-chat', messages }).catch((e: unknown) => e)) as {
      status: number;
      message: string;
    };
    expect(error.status).toBeGreaterThanOrEqual(400);
    expect(error.message).not.toContain(SECRET);
    if (status === 400) expect(error.message).toContain('Incorrect API key provided: Bearer ***');
    expect(t.rawLogs()).not.toContain(SECRET);
  });

  it('nor in a stream’s in-band error', async () => {
    mock.inject({ kind: 'error-event', afterChunks: 1, message: `Incorrect API key provided: ${SECRET}` });
    const stream = await client.chat.completions.create({ model: 'mock-chat', messages, stream: true });
    const failure = await (async () => {
      for await (const _ of stream) void _;
    })().catch((e: unknown) => e as Error);
    expect(String(failure)).not.toContain(SECRET);
    expect(t.rawLogs()).not.toContain(SECRET);
  });
});
