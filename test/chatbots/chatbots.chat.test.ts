import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import type { ConversationDetail } from '../../src/chatbots/chatbots.schemas.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import {
  createChatbot,
  lastPrompt,
  mockGateway,
  modelCalls,
  say,
  sendChat,
  startChatbotHarness,
  type ChatbotHarness,
} from './chatbots.support.ts';

let h: ChatbotHarness;

beforeAll(async () => {
  h = await startChatbotHarness();
});
afterAll(async () => {
  await h.close();
});
beforeEach(() => {
  h.mock.reset();
  h.mock.options.latencyMs = 0;
});

const conversation = async (id: string, t: TestApp = h.t) => {
  const response = await t.request(`/api/v1/chatbot/conversations/${id}`);
  expect(response.status).toBe(200);
  return (await response.json()) as ConversationDetail;
};
const iso = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe('the custom chat API', () => {
  it('starts a conversation: the model gets the system prompt, then the message; the reply comes back', async () => {
    const bot = await createChatbot(h.t, { system_prompt: 'Be brief.', temperature: 0.3, max_tokens: 77 });
    const reply = await say(h.t, bot.id, 'Hello there');
    expect(reply).toEqual({
      conversation_id: expect.stringMatching(/^conv_/),
      response: 're: Hello there',
      timestamp: expect.stringMatching(iso),
      chatbot_id: bot.id,
      fallback: false,
    });
    expect(Math.abs(Date.parse(reply.timestamp) - Date.now())).toBeLessThan(60_000);
    const [call] = modelCalls(h.mock);
    expect(call).toMatchObject({ model: 'mock-chat', temperature: 0.3, max_tokens: 77 });
    expect(call?.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello there' },
    ]);
    // Without conversation_id, every message starts a new conversation.
    expect((await say(h.t, bot.id, 'Hello again')).conversation_id).not.toBe(reply.conversation_id);
    expect(lastPrompt(h.mock)).toHaveLength(2);
  });

  it('after N turns the model sees exactly the last memory_length messages, in order', async () => {
    const bot = await createChatbot(h.t, { system_prompt: 'S', memory_length: 4 });
    let id: string | undefined;
    for (let turn = 1; turn <= 5; turn++) id = (await say(h.t, bot.id, `message ${turn}`, id)).conversation_id;
    expect(lastPrompt(h.mock)).toEqual([
      { role: 'system', content: 'S' },
      { role: 'user', content: 'message 3' },
      { role: 'assistant', content: 're: message 3' },
      { role: 'user', content: 'message 4' },
      { role: 'assistant', content: 're: message 4' },
      { role: 'user', content: 'message 5' },
    ]);
    const calls = modelCalls(h.mock);
    expect(calls.map((c) => (c.messages as unknown[]).length)).toEqual([2, 4, 6, 6, 6]);

    // An odd memory starts with an assistant message; zero sends no history at all.
    await h.t.request(`/api/v1/chatbot/${bot.id}`, { method: 'PUT', json: { memory_length: 3 } });
    await say(h.t, bot.id, 'message 6', id);
    expect(lastPrompt(h.mock).map((m) => m.content)).toEqual([
      'S',
      're: message 4',
      'message 5',
      're: message 5',
      'message 6',
    ]);
    await h.t.request(`/api/v1/chatbot/${bot.id}`, { method: 'PUT', json: { memory_length: 0 } });
    await say(h.t, bot.id, 'message 7', id);
    expect(lastPrompt(h.mock)).toEqual([
      { role: 'system', content: 'S' },
      { role: 'user', content: 'message 7' },
    ]);
  });

  it('lists conversations and shows one with its messages in order', async () => {
    const bot = await createChatbot(h.t);
    const first = await say(h.t, bot.id, 'What   is\nragport?');
    await say(h.t, bot.id, 'Tell me more', first.conversation_id);
    const second = await say(h.t, bot.id, 'x'.repeat(300));

    const list = await h.t.request(`/api/v1/chatbot/${bot.id}/conversations`);
    expect(list.status).toBe(200);
    const body = (await list.json()) as { conversations: { id: string; title: string }[]; total: number };
    expect(body).toMatchObject({ page: 1, page_size: 20, total: 2 });
    // The most recently active first.
    expect(body.conversations.map((c) => c.id)).toEqual([second.conversation_id, first.conversation_id]);
    expect(body.conversations[1]).toEqual({
      id: first.conversation_id,
      chatbot_id: bot.id,
      title: 'What is ragport?',
      message_count: 4,
      created_at: expect.stringMatching(iso),
      updated_at: expect.stringMatching(iso),
    });
    expect(body.conversations[0]?.title).toMatch(/^x{100}…$/);
    const page = await h.t.request(`/api/v1/chatbot/${bot.id}/conversations?page=2&page_size=1`);
    expect(((await page.json()) as { conversations: { id: string }[] }).conversations.map((c) => c.id)).toEqual([
      first.conversation_id,
    ]);

    const detail = await conversation(first.conversation_id);
    expect(detail.messages.map((m) => [m.role, m.content, m.fallback, m.sources])).toEqual([
      ['user', 'What   is\nragport?', false, null],
      ['assistant', 're: What   is\nragport?', false, null],
      ['user', 'Tell me more', false, null],
      ['assistant', 're: Tell me more', false, null],
    ]);
    for (const m of detail.messages) expect(m.timestamp).toMatch(iso);
    expect(detail.messages.map((m) => m.id)).toEqual([...new Set(detail.messages.map((m) => m.id))]);
  });

  it("an unknown conversation, or another chatbot's, is 'Conversation not found'", async () => {
    const bot = await createChatbot(h.t);
    const elsewhere = await createChatbot(h.t);
    const { conversation_id } = await say(h.t, elsewhere.id, 'hi');
    for (const id of ['conv_doesnotexist', conversation_id]) {
      const response = await sendChat(h.t, bot.id, { message: 'hi', conversation_id: id });
      expect(response.status).toBe(404);
      expect(await response.json()).toEqual({ error: 'Conversation not found' });
    }
    expect((await h.t.request('/api/v1/chatbot/conversations/conv_nope')).status).toBe(404);
    const unknownBot = await sendChat(h.t, 'bot_nope', { message: 'hi' });
    expect(unknownBot.status).toBe(404);
    expect(await unknownBot.json()).toEqual({ error: 'Chatbot not found' });
  });

  it('validates the message: required, a non-blank string', async () => {
    const bot = await createChatbot(h.t);
    // A NUL cannot be stored: refused before the model is called, not after.
    for (const json of [
      {},
      { message: '   ' },
      { message: 42 },
      { message: 'hi', conversation_id: 7 },
      { message: 'a\u0000b' },
    ]) {
      const response = await sendChat(h.t, bot.id, json);
      expect(response.status, JSON.stringify(json)).toBe(400);
      expect(typeof ((await response.json()) as { error: unknown }).error).toBe('string');
    }
    expect(modelCalls(h.mock)).toHaveLength(0);
  });

  it('a failed call leaves no half-turn: nothing is stored, not even a new conversation', async () => {
    const bot = await createChatbot(h.t, { fallback_responses: ['never for a 4xx'] });
    const { conversation_id } = await say(h.t, bot.id, 'first');
    h.mock.inject({ kind: 'status', status: 400, message: 'context too long' });
    const failed = await sendChat(h.t, bot.id, { message: 'second', conversation_id });
    expect(failed.status).toBe(400);
    expect(await failed.json()).toEqual({ error: 'context too long' });
    expect((await conversation(conversation_id)).messages.map((m) => m.content)).toEqual(['first', 're: first']);

    h.mock.inject({ kind: 'status', status: 422, message: 'nope' });
    expect((await sendChat(h.t, bot.id, { message: 'lost' })).status).toBe(422);
    const list = await h.t.request(`/api/v1/chatbot/${bot.id}/conversations`);
    expect(((await list.json()) as { total: number }).total).toBe(1);

    // The conversation is free again at once: the next message goes through.
    expect((await say(h.t, bot.id, 'third', conversation_id)).response).toBe('re: third');
    expect(lastPrompt(h.mock).map((m) => m.content)).toEqual([expect.any(String), 'first', 're: first', 'third']);
  });

  it('a client that disconnects aborts the model call and stores nothing', async () => {
    const bot = await createChatbot(h.t);
    const { conversation_id } = await say(h.t, bot.id, 'first');
    h.mock.inject({ kind: 'hang' });
    const controller = new AbortController();
    const pending = h.t
      .request(`/api/v1/chatbot/external/${bot.id}/chat`, {
        method: 'POST',
        json: { message: 'abandoned', conversation_id },
        signal: controller.signal,
      })
      .catch((error: unknown) => error);
    await h.mock.waitFor(() => modelCalls(h.mock).length === 2);
    controller.abort();
    await pending;
    await h.mock.waitFor(() => h.mock.requests.at(-1)?.aborted === true);
    // The lease is given back: the next turn follows the stored history only.
    expect((await say(h.t, bot.id, 'next', conversation_id)).response).toBe('re: next');
    expect((await conversation(conversation_id)).messages.map((m) => m.content)).toEqual([
      'first',
      're: first',
      'next',
      're: next',
    ]);
  });
});

describe('concurrent messages to one conversation', () => {
  it('are answered one at a time across two instances sharing the database: history never interleaves', async () => {
    // A second ragport on the same database: the two share nothing but PostgreSQL.
    const second = await startTestApp({
      database: h.t.database,
      gateway: mockGateway(h.mock),
      config: { adminKey: h.t.adminKey },
    });
    try {
      const bot = await createChatbot(h.t, { system_prompt: 'S', memory_length: 100 });
      const { conversation_id } = await say(h.t, bot.id, 'm0');
      h.mock.options.latencyMs = 150;
      const messages = ['m1', 'm2', 'm3', 'm4'];
      const replies = await Promise.all(
        messages.map((m, i) => say(i % 2 === 0 ? h.t : second, bot.id, m, conversation_id)),
      );
      expect(replies.map((r) => r.response)).toEqual(messages.map((m) => `re: ${m}`));

      const stored = (await conversation(conversation_id)).messages;
      expect(stored).toHaveLength(10);
      // Pairs are intact: every user message is followed by its own reply.
      for (let i = 0; i < stored.length; i += 2) {
        expect(stored[i]?.role).toBe('user');
        expect(stored[i + 1]).toMatchObject({ role: 'assistant', content: `re: ${stored[i]?.content}` });
      }
      // Each turn's model call saw exactly the conversation as stored before that turn.
      const calls = modelCalls(h.mock);
      for (let i = 2; i < stored.length; i += 2) {
        const call = calls.find((c) => (c.messages as { content: string }[]).at(-1)?.content === stored[i]?.content);
        expect((call?.messages as unknown[]).slice(1, -1)).toEqual(
          stored.slice(0, i).map((m) => ({ role: m.role, content: m.content })),
        );
      }
    } finally {
      await second.close();
    }
  });

  it('a message waits for a lease held elsewhere, and takes over a lease whose holder died', async () => {
    const bot = await createChatbot(h.t);
    const { conversation_id } = await say(h.t, bot.id, 'first');
    const db = h.t.database.db;
    // Another instance is answering this conversation right now.
    await db.execute(
      sql`update conversations set lock_token = 'elsewhere', locked_until = now() + interval '1 minute' where id = ${conversation_id}`,
    );
    const pending = say(h.t, bot.id, 'waiting', conversation_id);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(modelCalls(h.mock)).toHaveLength(1);
    await db.execute(
      sql`update conversations set lock_token = null, locked_until = null where id = ${conversation_id}`,
    );
    expect((await pending).response).toBe('re: waiting');

    // A holder that crashed: its lease ran out, so the next message proceeds at once.
    await db.execute(
      sql`update conversations set lock_token = 'crashed', locked_until = now() - interval '1 second' where id = ${conversation_id}`,
    );
    expect((await say(h.t, bot.id, 'after crash', conversation_id)).response).toBe('re: after crash');
    expect((await conversation(conversation_id)).message_count).toBe(6);
  });

  it('a message waiting for a conversation whose chatbot is deleted gets 404 at once, not a 409 after the wait', async () => {
    const bot = await createChatbot(h.t);
    const { conversation_id } = await say(h.t, bot.id, 'first');
    await h.t.database.db.execute(
      sql`update conversations set lock_token = 'elsewhere', locked_until = now() + interval '1 minute' where id = ${conversation_id}`,
    );
    const started = Date.now();
    const pending = sendChat(h.t, bot.id, { message: 'waiting', conversation_id });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await h.t.request(`/api/v1/chatbot/${bot.id}`, { method: 'DELETE' })).status).toBe(200);
    const answer = await pending;
    expect(answer.status).toBe(404);
    expect(await answer.json()).toEqual({ error: 'Conversation not found' });
    // The wait is 120 s; the waiter saw the conversation go at its next poll.
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(modelCalls(h.mock)).toHaveLength(1);
  });

  it('a message that waited is answered with the chatbot as it is when its turn comes, and stamped then', async () => {
    const bot = await createChatbot(h.t, { system_prompt: 'OLD', memory_length: 10 });
    const { conversation_id } = await say(h.t, bot.id, 'first');
    await h.t.database.db.execute(
      sql`update conversations set lock_token = 'elsewhere', locked_until = now() + interval '1 minute' where id = ${conversation_id}`,
    );
    const pending = say(h.t, bot.id, 'waiting', conversation_id);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const updated = await h.t.request(`/api/v1/chatbot/${bot.id}`, {
      method: 'PUT',
      json: { system_prompt: 'NEW', memory_length: 0 },
    });
    expect(updated.status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await h.t.database.db.execute(
      sql`update conversations set lock_token = null, locked_until = null where id = ${conversation_id}`,
    );
    expect((await pending).response).toBe('re: waiting');
    expect(lastPrompt(h.mock)).toEqual([
      { role: 'system', content: 'NEW' },
      { role: 'user', content: 'waiting' },
    ]);
    // Stored times follow the stored order: the waiting message is stamped when its turn began.
    const stored = (await conversation(conversation_id)).messages;
    const times = stored.map((m) => Date.parse(m.timestamp));
    expect(times).toEqual([...times].sort((a, b) => a - b));
  });

  it('messages waiting on one instance are answered in the order they arrived', async () => {
    const bot = await createChatbot(h.t, { memory_length: 100 });
    const { conversation_id } = await say(h.t, bot.id, 'first');
    await h.t.database.db.execute(
      sql`update conversations set lock_token = 'elsewhere', locked_until = now() + interval '1 minute' where id = ${conversation_id}`,
    );
    const messages = ['s0', 's1', 's2', 's3', 's4', 's5'];
    const pending = [];
    for (const m of messages) {
      pending.push(say(h.t, bot.id, m, conversation_id));
      // Far enough apart that each has arrived, and begun to wait, before the next.
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await h.t.database.db.execute(
      sql`update conversations set lock_token = null, locked_until = null where id = ${conversation_id}`,
    );
    await Promise.all(pending);
    const stored = (await conversation(conversation_id)).messages.filter((m) => m.role === 'user');
    expect(stored.map((m) => m.content)).toEqual(['first', ...messages]);
  });

  it('messages a few milliseconds apart keep their order: the place is taken before any database round trip', async () => {
    // On a PostgreSQL pool the two lookups before the queue finished out of order: messages 5–30 ms
    // apart were stored out of order in 7 of 20 runs.
    const bot = await createChatbot(h.t, { memory_length: 100 });
    const { conversation_id } = await say(h.t, bot.id, 'first');
    for (let round = 0; round < 3; round++) {
      await h.t.database.db.execute(
        sql`update conversations set lock_token = 'elsewhere', locked_until = now() + interval '1 minute' where id = ${conversation_id}`,
      );
      const messages = Array.from({ length: 8 }, (_, i) => `r${round}m${i}`);
      const pending = [];
      for (const m of messages) {
        pending.push(say(h.t, bot.id, m, conversation_id));
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      await new Promise((resolve) => setTimeout(resolve, 300));
      await h.t.database.db.execute(
        sql`update conversations set lock_token = null, locked_until = null where id = ${conversation_id}`,
      );
      await Promise.all(pending);
      const stored = (await conversation(conversation_id)).messages.filter((m) => m.role === 'user');
      expect(stored.slice(-8).map((m) => m.content)).toEqual(messages);
    }
  });

  it('takes the message as sent: leading and trailing white space reach the model and the record', async () => {
    const bot = await createChatbot(h.t);
    const code = '    if x:\n        return 1\n';
    const { conversation_id } = await say(h.t, bot.id, code);
    expect(lastPrompt(h.mock).at(-1)).toEqual({ role: 'user', content: code });
    expect((await conversation(conversation_id)).messages[0]?.content).toBe(code);
  });
});
