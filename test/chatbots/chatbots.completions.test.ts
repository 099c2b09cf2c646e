import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import type { ChatbotRecord, Source } from '../../src/chatbots/chatbots.schemas.ts';
import { queryRows } from '../../src/db/client.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import {
  completions,
  createChatbot,
  lastPrompt,
  modelCalls,
  say,
  startChatbotHarness,
  type ChatbotHarness,
} from './chatbots.support.ts';

let h: ChatbotHarness;
let ragBot: ChatbotRecord;

beforeAll(async () => {
  h = await startChatbotHarness();
  await createCollection(h.t, 'kb');
  const response = await h.t.request('/api/v1/rag/collections/kb/documents', {
    method: 'POST',
    json: { name: 'cats.txt', content: 'Cats are small domesticated felines. They purr when content and hunt mice.' },
  });
  expect((await waitForDocument(h.t, ((await response.json()) as { id: string }).id)).status).toBe('processed');
  ragBot = await createChatbot(h.t, { system_prompt: 'Cat expert.', use_rag: true, rag_collection: 'kb' });
}, 120_000);
afterAll(async () => {
  await h.close();
});
beforeEach(() => h.mock.reset());

const user = (content: string) => ({ role: 'user', content });

/** The SSE events of a body: each `data:` payload, parsed unless it is [DONE]. */
function events(body: string): (Record<string, unknown> | '[DONE]')[] {
  expect(body.endsWith('\n\n')).toBe(true);
  return body
    .slice(0, -2)
    .split('\n\n')
    .map((frame) => {
      expect(frame.startsWith('data: ')).toBe(true);
      const data = frame.slice(6);
      return data === '[DONE]' ? '[DONE]' : (JSON.parse(data) as Record<string, unknown>);
    });
}

/** A chunk without what differs between two calls: ids, times, token counts, the chatbot's sources. */
const shape = (event: Record<string, unknown> | '[DONE]') => {
  if (event === '[DONE]') return event;
  const { id, created, usage, ...rest } = event;
  delete rest.sources;
  return { ...rest, id: typeof id, created: typeof created, usage: usage && Object.keys(usage) };
};

const text = (all: (Record<string, unknown> | '[DONE]')[]) =>
  all
    .map((e) => (e === '[DONE]' ? '' : ((e.choices as { delta?: { content?: string } }[])[0]?.delta?.content ?? '')))
    .join('');

describe('the chatbot completions endpoint', () => {
  it("answers in the chat.completion format with the chatbot's model, prompt and settings", async () => {
    const bot = await createChatbot(h.t, { system_prompt: 'Be kind.', temperature: 0.2, max_tokens: 50 });
    const response = await completions(h.t, bot.id, { model: 'gpt-4o', messages: [user('hi')] });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      id: expect.any(String),
      object: 'chat.completion',
      created: expect.any(Number),
      model: 'mock-chat',
      choices: [{ index: 0, message: { role: 'assistant', content: 're: hi' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: 2, total_tokens: expect.any(Number) },
    });
    expect(body).not.toHaveProperty('sources');
    expect(modelCalls(h.mock)[0]).toMatchObject({
      model: 'mock-chat',
      temperature: 0.2,
      max_tokens: 50,
      messages: [
        { role: 'system', content: 'Be kind.' },
        { role: 'user', content: 'hi' },
      ],
    });

    // temperature and max_tokens (or max_completion_tokens) of the request win; the caller's other
    // OpenAI fields go to the model as sent; the placeholder model does not.
    const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: {} } } }];
    const others = {
      top_p: 0.1,
      stop: ['END'],
      seed: 7,
      user: 'u-1',
      response_format: { type: 'json_object' },
      tools,
      tool_choice: 'auto',
    };
    await completions(h.t, bot.id, { messages: [user('hi')], temperature: 1.5, max_tokens: 9, ...others });
    expect(modelCalls(h.mock)[1]).toMatchObject({ model: 'mock-chat', temperature: 1.5, max_tokens: 9, ...others });
    await completions(h.t, bot.id, { messages: [user('hi')], max_completion_tokens: 12 });
    expect(modelCalls(h.mock)[2]).toMatchObject({ temperature: 0.2, max_tokens: 12 });
    // The placeholder may be null too (absent above).
    expect((await completions(h.t, bot.id, { model: null, messages: [user('hi')] })).status).toBe(200);
  });

  it("sends the caller's messages as history after the system prompt, bounded by memory_length; the caller's own system messages stay", async () => {
    const bot = await createChatbot(h.t, { system_prompt: 'Bot rules.', memory_length: 2 });
    const messages = [
      { role: 'system', content: 'Caller rules.' },
      user('u1'),
      { role: 'assistant', content: 'a1' },
      user('u2'),
      { role: 'assistant', content: 'a2' },
      user('u3'),
    ];
    expect((await completions(h.t, bot.id, { messages })).status).toBe(200);
    expect(lastPrompt(h.mock)).toEqual([
      { role: 'system', content: 'Bot rules.' },
      { role: 'system', content: 'Caller rules.' },
      user('u2'),
      { role: 'assistant', content: 'a2' },
      user('u3'),
    ]);
  });

  it('adds the sources to the completion when the chatbot retrieves', async () => {
    const response = await completions(h.t, ragBot.id, { messages: [user('Which animal purrs?')] });
    const body = (await response.json()) as { sources: Source[]; choices: unknown[] };
    expect(body.sources).toEqual([
      {
        title: 'cats.txt',
        content: 'Cats are small domesticated felines. They purr when content and hunt mice.',
        score: expect.any(Number),
        document_id: expect.stringMatching(/^doc_/),
      },
    ]);
    expect(lastPrompt(h.mock)[0]?.content).toContain('<context>\n[1] cats.txt\nCats are small');
  });

  it('validates: structured 400s, and the last message must be the user turn', async () => {
    const bot = await createChatbot(h.t);
    const cases: [Record<string, unknown>, string][] = [
      [{ messages: [] }, 'messages'],
      [{ messages: [user('hi'), { role: 'assistant', content: 'prefill' }] }, 'messages'],
      [{ messages: [user('hi')], temperature: 3 }, 'temperature'],
      [{ messages: [user('hi')], stream: 'yes' }, 'stream'],
    ];
    for (const [json, param] of cases) {
      const response = await completions(h.t, bot.id, json);
      expect(response.status, JSON.stringify(json)).toBe(400);
      expect(await response.json()).toMatchObject({ error: { type: 'invalid_request_error', param } });
    }
    const missing = await h.t.request(`/api/v1/chatbot/external/${bot.id}/chat/completions`, {
      method: 'POST',
      json: {},
    });
    expect(await missing.json()).toMatchObject({ error: { code: 'missing_field', param: 'messages' } });
    expect(modelCalls(h.mock)).toHaveLength(0);
  });
});

describe('streaming', () => {
  const stream = async (path: string, json: Record<string, unknown>) => {
    const response = await h.t.request(path, { method: 'POST', json: { stream: true, ...json } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    return events(await response.text());
  };

  it('is framed exactly like the standard API, with the sources on the first chunk', async () => {
    const messages = [user('Which animal purrs?')];
    for (const include_usage of [true, false]) {
      const options = { stream_options: { include_usage } };
      const standard = await stream('/api/v1/chat/completions', { model: 'mock-chat', messages, ...options });
      const chatbot = await stream(`/api/v1/chatbot/external/${ragBot.id}/chat/completions`, {
        model: 'x',
        messages,
        ...options,
      });
      expect(chatbot.map(shape)).toEqual(standard.map(shape));
      expect(chatbot.at(-1)).toBe('[DONE]');
      expect(text(chatbot)).toBe('re: Which animal purrs?');
      expect(chatbot.some((e) => e !== '[DONE]' && 'usage' in e)).toBe(include_usage);
      const withSources = chatbot.filter((e) => e !== '[DONE]' && 'sources' in e);
      expect(withSources).toEqual([chatbot[0]]);
      expect(titles(withSources[0] as { sources: Source[] })).toEqual(['cats.txt']);
    }
  });

  it('a failure after the first event is sent in-band, then [DONE]', async () => {
    h.mock.inject({ kind: 'error-event', afterChunks: 1 });
    const all = await stream(`/api/v1/chatbot/external/${ragBot.id}/chat/completions`, { messages: [user('hi')] });
    expect(all.at(-2)).toEqual({ error: { message: expect.any(String), type: 'api_error', code: 'upstream_error' } });
    expect(all.at(-1)).toBe('[DONE]');
  });
});

const titles = (body: { sources: Source[] }) => body.sources.map((s) => s.title);

describe('the official openai client', () => {
  it('works with base_url /api/v1/chatbot/external/{id}, plain and streamed', async () => {
    const client = new OpenAI({
      apiKey: h.t.adminKey,
      baseURL: `${h.t.url}/api/v1/chatbot/external/${ragBot.id}`,
      maxRetries: 0,
    });
    const completion = await client.chat.completions.create({
      model: 'anything',
      messages: [{ role: 'user', content: 'Which animal purrs?' }],
    });
    expect(completion.choices[0]?.message.content).toBe('re: Which animal purrs?');
    expect(titles(completion as unknown as { sources: Source[] })).toEqual(['cats.txt']);

    const chunks = await client.chat.completions.create({
      model: 'anything',
      messages: [{ role: 'user', content: 'Tell me about cats' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = '';
    let finish: string | null | undefined;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of chunks) {
      content += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    expect(content).toBe('re: Tell me about cats');
    expect(finish).toBe('stop');
    expect(usage?.total_tokens).toBeGreaterThan(0);

    const missing = new OpenAI({
      apiKey: h.t.adminKey,
      baseURL: `${h.t.url}/api/v1/chatbot/external/bot_missing`,
      maxRetries: 0,
    });
    await expect(
      missing.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'hi' }] }),
    ).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe('usage', () => {
  it('is counted against the calling key, for both endpoints, streamed or not', async () => {
    const key = await h.t.createKey({ name: 'counted', scopes: ['write', 'chat'] });
    const bot = await createChatbot(h.t, {}, key.key);
    expect((await completions(h.t, bot.id, { messages: [user('one two')] }, key.key)).status).toBe(200);
    const streamed = await completions(h.t, bot.id, { messages: [user('three')], stream: true }, key.key);
    await streamed.text();
    await say(h.t, bot.id, 'four five six', undefined, key.key);

    // What the mock reported, from the bytes it sent.
    let prompt = 0;
    let completion = 0;
    for (const request of h.mock.requests) {
      const reported = [...request.sent.matchAll(/"usage":(\{[^}]*\})/g)].at(-1)?.[1];
      const parsed = JSON.parse(reported ?? '{}') as { prompt_tokens: number; completion_tokens: number };
      prompt += parsed.prompt_tokens;
      completion += parsed.completion_tokens;
    }
    await h.t.app.usage.flush();
    const rows = await queryRows<{ model: string; requests: number; prompt_tokens: string; completion_tokens: string }>(
      h.t.database.db,
      sql`select model, requests, prompt_tokens, completion_tokens from usage_daily where key_id = ${key.id}`,
    );
    expect(rows.map((r) => [r.model, r.requests, Number(r.prompt_tokens), Number(r.completion_tokens)])).toEqual([
      ['mock-chat', 3, prompt, completion],
    ]);
    expect(prompt).toBeGreaterThan(0);
  });

  it('a key over its monthly token quota is refused before any model call', async () => {
    const key = await h.t.createKey({ name: 'quota', scopes: ['write', 'chat'], quota: { tokens_per_month: 1 } });
    const bot = await createChatbot(h.t, { fallback_responses: ['not for quotas'] }, key.key);
    expect((await completions(h.t, bot.id, { messages: [user('spend')] }, key.key)).status).toBe(200);
    await h.t.app.usage.flush();
    const refused = await completions(h.t, bot.id, { messages: [user('again')] }, key.key);
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ error: { code: 'quota_exceeded' } });
    expect(modelCalls(h.mock)).toHaveLength(1);
  });
});
