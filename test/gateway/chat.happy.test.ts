import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

let mock: MockUpstream;
let t: TestApp;
let chatKey: string;

beforeAll(async () => {
  mock = await startMockUpstream({ apiKey: 'sk-upstream-secret-123', models: ['mock-chat', 'mock-embed'] });
  t = await startTestApp({
    gateway: {
      providers: [{ name: 'mock', base_url: mock.url, apiKey: 'sk-upstream-secret-123', models: ['mock-chat'] }],
      aliases: { fast: 'mock-chat' },
    },
  });
  chatKey = (await t.createKey({ name: 'chat', scopes: ['chat', 'read'] })).key;
});
afterAll(async () => {
  await t.close();
  await mock.close();
});
beforeEach(() => mock.reset());

const messages = [
  { role: 'system', content: 'be brief' },
  { role: 'user', content: 'hello there friend' },
];

describe('POST /api/v1/chat/completions', () => {
  it('never logs the upstream key, even when the upstream fails', async () => {
    mock.inject({ kind: 'status', status: 500 }, 3);
    const response = await t.request('/api/v1/chat/completions', {
      method: 'POST',
      key: chatKey,
      json: { model: 'mock-chat', messages },
    });
    expect(response.status).toBe(502);
    expect(t.logs.some((l) => l.msg === 'request failed' || String(l.msg).startsWith('upstream call failed'))).toBe(
      true,
    );
    expect(t.rawLogs()).not.toContain('sk-upstream-secret-123');
    expect(JSON.stringify(t.app.gateway.providers())).not.toContain('sk-upstream-secret-123');
  });

  it('passes the upstream completion through and forwards fields it does not interpret', async () => {
    const body = {
      model: 'mock-chat',
      messages,
      temperature: 0.5,
      max_tokens: 20,
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      tool_choice: 'auto',
      response_format: { type: 'text' },
      stop: ['x'],
      seed: 7,
      top_p: 0.9,
      presence_penalty: 0.1,
      frequency_penalty: 0.2,
      logprobs: false,
      user: 'u1',
    };
    const response = await t.request('/api/v1/chat/completions', { method: 'POST', key: chatKey, json: body });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const completion = (await response.json()) as Record<string, unknown>;
    expect(completion).toMatchObject({
      object: 'chat.completion',
      model: 'mock-chat',
      choices: [{ index: 0, message: { role: 'assistant', content: 'w0 w1 w2 w3 w4 ' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
      system_fingerprint: 'fp_mock',
    });
    expect(mock.requests).toHaveLength(1);
    expect(mock.requests[0]?.body).toEqual(body);
    expect(mock.requests[0]?.headers.authorization).toBe('Bearer sk-upstream-secret-123');
  });

  it('resolves an alias to its model upstream', async () => {
    const response = await t.request('/api/v1/chat/completions', {
      method: 'POST',
      key: chatKey,
      json: { model: 'fast', messages },
    });
    expect(response.status).toBe(200);
    expect(mock.requests[0]?.body?.model).toBe('mock-chat');
  });

  it('works with the official openai client: completion, stream, models', async () => {
    const client = new OpenAI({ apiKey: chatKey, baseURL: `${t.url}/api/v1`, maxRetries: 0 });
    const completion = await client.chat.completions.create({
      model: 'mock-chat',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(completion.choices[0]?.message.content).toBe('w0 w1 w2 w3 w4 ');
    expect(completion.usage?.total_tokens).toBe(6);

    const stream = await client.chat.completions.create({
      model: 'mock-chat',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('w0 w1 w2 w3 w4 ');
    expect(usage).toEqual({ prompt_tokens: 1, completion_tokens: 5, total_tokens: 6 });

    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['mock-chat', 'fast']);
    expect(models.data[0]).toMatchObject({ object: 'model', owned_by: 'mock' });
  });
});
