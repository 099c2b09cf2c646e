import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ChatbotRecord, ConversationDetail } from '../../src/chatbots/chatbots.schemas.ts';
import {
  completions,
  createChatbot,
  modelCalls,
  say,
  sendChat,
  startChatbotHarness,
  type ChatbotHarness,
} from './chatbots.support.ts';

let h: ChatbotHarness;
let bot: ChatbotRecord;
let plain: ChatbotRecord;

beforeAll(async () => {
  // Each provider call is tried twice (max_retries 1) and times out after 400 ms.
  h = await startChatbotHarness();
  bot = await createChatbot(h.t, { fallback_responses: ['First fallback', 'Second fallback', 'Third fallback'] });
  plain = await createChatbot(h.t);
});
afterAll(async () => {
  await h.close();
});
beforeEach(() => h.mock.reset());

const failTwice = () => h.mock.inject({ kind: 'status', status: 500, message: 'upstream exploded' }, 2);
const fallbackLogs = () => h.t.logs.filter((l) => l.msg === 'model provider failed; answered with a fallback response');
const user = (content: string) => ({ role: 'user', content });

describe('fallback responses', () => {
  it('answer in turn when the provider fails after its retries, marked, stored and logged with the cause', async () => {
    const before = fallbackLogs().length;
    failTwice();
    const first = await say(h.t, bot.id, 'hello');
    expect(first).toMatchObject({ response: 'First fallback', fallback: true, chatbot_id: bot.id });
    expect(modelCalls(h.mock)).toHaveLength(2);

    failTwice();
    const second = await say(h.t, bot.id, 'again', first.conversation_id);
    expect(second).toMatchObject({ response: 'Second fallback', fallback: true });

    const log = fallbackLogs().slice(before);
    expect(log).toHaveLength(2);
    expect(log[0]).toMatchObject({ level: 40, chatbot_id: bot.id, code: 'upstream_error' });
    expect(String(log[0]?.cause)).toMatch(/HTTP 500/);

    // The turn is stored like any other, marked; the model sees it as history afterwards.
    const detail = (await (
      await h.t.request(`/api/v1/chatbot/conversations/${first.conversation_id}`)
    ).json()) as ConversationDetail;
    expect(detail.messages.map((m) => [m.role, m.content, m.fallback])).toEqual([
      ['user', 'hello', false],
      ['assistant', 'First fallback', true],
      ['user', 'again', false],
      ['assistant', 'Second fallback', true],
    ]);
    expect((await say(h.t, bot.id, 'ok now?', first.conversation_id)).fallback).toBe(false);
  });

  it('the completions endpoint marks them with finish_reason "fallback", plain and streamed, and keeps rotating', async () => {
    failTwice();
    const response = await completions(h.t, bot.id, { messages: [user('hi')] });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      object: 'chat.completion',
      model: 'mock-chat',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Third fallback' }, finish_reason: 'fallback' }],
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
    });

    failTwice();
    const streamed = await completions(h.t, bot.id, {
      messages: [user('hi')],
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(streamed.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const frames = (await streamed.text()).split('\n\n').filter(Boolean);
    expect(frames.at(-1)).toBe('data: [DONE]');
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.slice(6)) as Record<string, unknown>);
    expect(chunks).toEqual([
      expect.objectContaining({
        object: 'chat.completion.chunk',
        choices: [{ index: 0, delta: { role: 'assistant', content: 'First fallback' }, finish_reason: null }],
      }),
      expect.objectContaining({ choices: [{ index: 0, delta: {}, finish_reason: 'fallback' }] }),
      expect.objectContaining({ choices: [], usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } }),
    ]);
  });

  it('answer a provider timeout too', async () => {
    const before = fallbackLogs().length;
    h.mock.inject({ kind: 'hang' });
    const reply = await say(h.t, bot.id, 'slow?');
    expect(reply).toMatchObject({ fallback: true, response: expect.stringMatching(/fallback$/) });
    expect(fallbackLogs().slice(before)[0]).toMatchObject({ code: 'upstream_timeout' });
    await h.mock.waitFor(() => h.mock.requests[0]?.aborted === true);
  });

  it('never stand in for an upstream 4xx: the caller gets that error, and nothing is stored', async () => {
    h.mock.inject({ kind: 'status', status: 400, message: 'bad request upstream', code: 'context_length_exceeded' });
    const chat = await sendChat(h.t, bot.id, { message: 'hi' });
    expect(chat.status).toBe(400);
    expect(await chat.json()).toEqual({ error: 'bad request upstream' });

    h.mock.inject({ kind: 'status', status: 400, message: 'bad request upstream', code: 'context_length_exceeded' });
    const completion = await completions(h.t, bot.id, { messages: [user('hi')] });
    expect(completion.status).toBe(400);
    expect(await completion.json()).toEqual({
      error: { message: 'bad request upstream', type: 'invalid_request_error', code: 'context_length_exceeded' },
    });
    expect(modelCalls(h.mock)).toHaveLength(2);
    const list = await h.t.request(`/api/v1/chatbot/${bot.id}/conversations`);
    expect(
      ((await list.json()) as { conversations: { title: string }[] }).conversations.map((c) => c.title),
    ).not.toContain('hi');
  });

  it('without fallback responses the gateway error is returned: 502, or 504 on a timeout', async () => {
    failTwice();
    const chat = await sendChat(h.t, plain.id, { message: 'hi' });
    expect(chat.status).toBe(502);
    expect(await chat.json()).toEqual({ error: 'Provider mock answered HTTP 500' });

    failTwice();
    const completion = await completions(h.t, plain.id, { messages: [user('hi')] });
    expect(completion.status).toBe(502);
    expect(await completion.json()).toEqual({
      error: { message: 'Provider mock answered HTTP 500', type: 'api_error', code: 'upstream_error' },
    });

    failTwice();
    const streamed = await completions(h.t, plain.id, { messages: [user('hi')], stream: true });
    expect(streamed.status).toBe(502);
    expect(streamed.headers.get('content-type')).toMatch(/^application\/json/);

    h.mock.inject({ kind: 'hang' });
    const timeout = await sendChat(h.t, plain.id, { message: 'hi' });
    expect(timeout.status).toBe(504);
    expect(await timeout.json()).toEqual({ error: 'Provider mock timed out' });
  });

  it('a stream that fails after it started reports the failure in-band, as the standard API does', async () => {
    h.mock.inject({ kind: 'error-event', afterChunks: 1 });
    const streamed = await completions(h.t, bot.id, { messages: [user('hi')], stream: true });
    const body = await streamed.text();
    expect(body).toMatch(/data: \{"error":\{[^\n]*"code":"upstream_error"\}\}\n\ndata: \[DONE\]\n\n$/);
    expect(body).not.toContain('fallback');
  });
});
