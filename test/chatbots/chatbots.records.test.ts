import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatbotRecord } from '../../src/chatbots/chatbots.schemas.ts';
import { createCollection } from '../support/documents.ts';
import { createChatbot, say, sendChat, startChatbotHarness, type ChatbotHarness } from './chatbots.support.ts';

let h: ChatbotHarness;
let owner: { id: string; key: string };
let other: { id: string; key: string };
const scopes = ['read', 'write', 'delete', 'chat'];

beforeAll(async () => {
  h = await startChatbotHarness();
  await createCollection(h.t, 'kb');
  await createCollection(h.t, 'secret');
  owner = await h.t.createKey({ name: 'owner', scopes, collections: ['kb'] });
  other = await h.t.createKey({ name: 'other', scopes });
});
afterAll(async () => {
  await h.close();
});

const create = (json: Record<string, unknown>, key?: string) =>
  h.t.request('/api/v1/chatbot/create', {
    method: 'POST',
    json,
    ...(key === undefined ? {} : { key }),
  });
/** Every chatbot route answers `key` about chatbot `id` exactly as about one that does not exist. */
async function expectHidden(id: string, key: string, change: Record<string, unknown>) {
  const attempts = {
    get: get(id, key),
    put: put(id, change, key),
    delete: h.t.request(`/api/v1/chatbot/${id}`, { method: 'DELETE', key }),
    conversations: h.t.request(`/api/v1/chatbot/${id}/conversations`, { key }),
    chat: sendChat(h.t, id, { message: 'hi' }, key),
  };
  for (const [name, pending] of Object.entries(attempts)) {
    const response = await pending;
    expect({ status: response.status, body: await response.json() }, `${name} ${id}`).toEqual({
      status: 404,
      body: { error: 'Chatbot not found' },
    });
  }
}

const list = async (key?: string) =>
  ((await (await h.t.request('/api/v1/chatbot/list', key ? { key } : {})).json()) as { chatbots: ChatbotRecord[] })
    .chatbots;
const get = (id: string, key?: string) => h.t.request(`/api/v1/chatbot/${id}`, key === undefined ? {} : { key });
const put = (id: string, json: Record<string, unknown>, key?: string) =>
  h.t.request(`/api/v1/chatbot/${id}`, { method: 'PUT', json, ...(key === undefined ? {} : { key }) });

describe('chatbot records', () => {
  it('creation answers 201 with the full record and the contract defaults', async () => {
    const response = await create({ name: 'helper', model: 'mock-chat' });
    expect(response.status).toBe(201);
    const bot = (await response.json()) as ChatbotRecord;
    expect(bot).toEqual({
      id: expect.stringMatching(/^bot_[A-Za-z0-9]{22}$/),
      name: 'helper',
      chatbot_type: 'assistant',
      model: 'mock-chat',
      system_prompt: expect.stringContaining('helpful assistant'),
      use_rag: false,
      rag_collection: null,
      rag_top_k: 5,
      rag_similarity_threshold: 0.3,
      rag_rerank: null,
      memory_length: 10,
      temperature: 0.7,
      max_tokens: 1000,
      fallback_responses: [],
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updated_at: bot.created_at,
    });
    expect(await (await get(bot.id)).json()).toEqual(bot);
  });

  it('chatbot_type selects the default system prompt; an own prompt wins; null or empty restores the default', async () => {
    const prompts = new Map<string, string>();
    for (const type of ['assistant', 'support', 'sales', 'tutor']) {
      prompts.set(type, (await createChatbot(h.t, { chatbot_type: type })).system_prompt);
    }
    expect(new Set(prompts.values()).size).toBe(4);
    expect(prompts.get('support')).toMatch(/support/);
    expect(prompts.get('sales')).toMatch(/sales/);

    const bot = await createChatbot(h.t, { chatbot_type: 'support', system_prompt: 'Talk like a pirate.' });
    expect(bot.system_prompt).toBe('Talk like a pirate.');
    const retyped = (await (await put(bot.id, { chatbot_type: 'sales' })).json()) as ChatbotRecord;
    expect(retyped.system_prompt).toBe('Talk like a pirate.');
    const reset = (await (await put(bot.id, { system_prompt: null })).json()) as ChatbotRecord;
    expect(reset.system_prompt).toBe(prompts.get('sales'));
    const blank = await createChatbot(h.t, { chatbot_type: 'support', system_prompt: '  ' });
    expect(blank.system_prompt).toBe(prompts.get('support'));
  });

  it.each([
    // undefined leaves the field out of the JSON body.
    [{ name: undefined }, 'name: required'],
    [{ model: undefined }, 'model: required'],
    [{ temperature: 2.01 }, /^temperature: /],
    [{ temperature: -0.1 }, /^temperature: /],
    [{ rag_top_k: 0 }, /^rag_top_k: /],
    [{ rag_top_k: 51 }, /^rag_top_k: /],
    [{ memory_length: -1 }, /^memory_length: /],
    [{ memory_length: 101 }, /^memory_length: /],
    [{ max_tokens: 0 }, /^max_tokens: /],
    [{ fallback_responses: 'sorry' }, /^fallback_responses: /],
    [{ fallback_responses: [''] }, /^fallback_responses\.0: /],
    [{ use_rag: 'yes' }, /^use_rag: /],
  ])('validates %j: 400 with a simple error', async (fields, message) => {
    const response = await create({ name: 'x', model: 'mock-chat', ...fields });
    expect(response.status).toBe(400);
    const body = (await response.json()) as { error: string };
    expect(Object.keys(body)).toEqual(['error']);
    expect(body.error).toMatch(message);
  });

  it('accepts the edges of each range', async () => {
    const bot = await createChatbot(h.t, { temperature: 2, rag_top_k: 50, memory_length: 0, max_tokens: 1 });
    expect(bot).toMatchObject({ temperature: 2, rag_top_k: 50, memory_length: 0, max_tokens: 1 });
    expect((await createChatbot(h.t, { temperature: 0, rag_top_k: 1, memory_length: 100 })).temperature).toBe(0);
  });

  it('an unknown model is 404; retrieval needs an existing collection the key may use', async () => {
    const model = await create({ name: 'x', model: 'nope' });
    expect(model.status).toBe(404);
    expect(await model.json()).toEqual({ error: "The model 'nope' does not exist" });

    // use_rag with no collection named is no existing collection: the contract's 404.
    const unnamed = await create({ name: 'x', model: 'mock-chat', use_rag: true });
    expect(unnamed.status).toBe(404);
    expect(await unnamed.json()).toEqual({ error: 'Collection not found' });
    const missing = await create({ name: 'x', model: 'mock-chat', use_rag: true, rag_collection: 'nowhere' });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: 'Collection not found' });
    // A key restricted to other collections: the collection exists, but not for this key.
    const hidden = await create({ name: 'x', model: 'mock-chat', use_rag: true, rag_collection: 'secret' }, owner.key);
    expect(hidden.status).toBe(404);
    expect(await hidden.json()).toEqual({ error: 'Collection not found' });
    const named = await create({ name: 'x', model: 'mock-chat', rag_collection: 'secret' }, owner.key);
    expect(named.status).toBe(404);

    const allowed = await createChatbot(h.t, { use_rag: true, rag_collection: 'kb' }, owner.key);
    expect(allowed).toMatchObject({ use_rag: true, rag_collection: 'kb' });
    const moved = await put(allowed.id, { rag_collection: 'secret' }, owner.key);
    expect(moved.status).toBe(404);
    expect(await moved.json()).toEqual({ error: 'Collection not found' });
    expect((await put(allowed.id, { model: 'nope' }, owner.key)).status).toBe(404);
    const cleared = await put(allowed.id, { rag_collection: null }, owner.key);
    expect(cleared.status).toBe(404);
    expect(await cleared.json()).toEqual({ error: 'Collection not found' });
    const off = await put(allowed.id, { use_rag: false, rag_collection: null }, owner.key);
    expect(off.status).toBe(200);
    expect(await off.json()).toMatchObject({ use_rag: false, rag_collection: null });
  });

  it('a partial update changes only the fields sent and moves updated_at', async () => {
    const bot = await createChatbot(h.t, { name: 'before', fallback_responses: ['a'] });
    const response = await put(bot.id, { name: 'after', temperature: 1.5, fallback_responses: ['b', 'c'] });
    expect(response.status).toBe(200);
    const updated = (await response.json()) as ChatbotRecord;
    expect(updated).toEqual({
      ...bot,
      name: 'after',
      temperature: 1.5,
      fallback_responses: ['b', 'c'],
      updated_at: expect.any(String),
    });
    expect(Date.parse(updated.updated_at)).toBeGreaterThanOrEqual(Date.parse(bot.updated_at));
    expect((await put(bot.id, { memory_length: 500 })).status).toBe(400);
    expect(await (await get(bot.id)).json()).toEqual(updated);
  });
});

describe('ownership', () => {
  it("a key sees and uses only its own chatbots; another key's is 'Chatbot not found'; admin sees all", async () => {
    const mine = await createChatbot(h.t, { name: 'mine' }, owner.key);
    const theirs = await createChatbot(h.t, { name: 'theirs' }, other.key);
    const conversation = await say(h.t, mine.id, 'hello', undefined, owner.key);

    expect((await list(owner.key)).map((b) => b.id)).toContain(mine.id);
    expect((await list(owner.key)).map((b) => b.id)).not.toContain(theirs.id);
    expect((await list(other.key)).map((b) => b.id)).toEqual([theirs.id]);
    expect((await list()).map((b) => b.id)).toEqual(expect.arrayContaining([mine.id, theirs.id]));

    const notFound = { error: 'Chatbot not found' };
    const attempts = [
      get(mine.id, other.key),
      put(mine.id, { name: 'stolen' }, other.key),
      h.t.request(`/api/v1/chatbot/${mine.id}`, { method: 'DELETE', key: other.key }),
      h.t.request(`/api/v1/chatbot/${mine.id}/conversations`, { key: other.key }),
      sendChat(h.t, mine.id, { message: 'hi' }, other.key),
      sendChat(h.t, mine.id, { message: 'hi', conversation_id: conversation.conversation_id }, other.key),
    ];
    for (const response of await Promise.all(attempts)) {
      expect(response.status).toBe(404);
      expect(await response.json()).toEqual(notFound);
    }
    const foreignConversation = await h.t.request(`/api/v1/chatbot/conversations/${conversation.conversation_id}`, {
      key: other.key,
    });
    expect(foreignConversation.status).toBe(404);
    expect(await foreignConversation.json()).toEqual({ error: 'Conversation not found' });
    const completion = await h.t.request(`/api/v1/chatbot/external/${mine.id}/chat/completions`, {
      method: 'POST',
      key: other.key,
      json: { model: 'x', messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(completion.status).toBe(404);
    expect(await completion.json()).toEqual({
      error: { message: 'Chatbot not found', type: 'not_found_error', code: 'not_found' },
    });
    expect(await (await get(mine.id, owner.key)).json()).toMatchObject({ name: 'mine' });
    // Admin sees and uses every chatbot.
    expect((await get(mine.id)).status).toBe(200);
    expect((await sendChat(h.t, mine.id, { message: 'hi' })).status).toBe(200);
  });

  it("an admin key restricted to collections sees others' chatbots only over those collections", async () => {
    const hidden = await createChatbot(h.t, { name: 'hidden', use_rag: true, rag_collection: 'secret' }, other.key);
    const visible = await createChatbot(h.t, { name: 'visible', use_rag: true, rag_collection: 'kb' }, other.key);
    const plain = await createChatbot(h.t, { name: 'plain' }, other.key);
    const conversation = await say(h.t, hidden.id, 'hello', undefined, other.key);
    const admin = await h.t.createKey({ name: 'narrow-admin', scopes: ['admin'], collections: ['kb'] });

    const listed = await list(admin.key);
    const ids = listed.map((b) => b.id);
    expect(ids).toContain(visible.id);
    expect(ids).not.toContain(hidden.id);
    // Over no collection, but its owner is unrestricted: not a key this admin manages.
    expect(ids).not.toContain(plain.id);
    expect(JSON.stringify(listed)).not.toContain('secret');

    // Exactly as a chatbot that does not exist.
    await expectHidden(hidden.id, admin.key, { rag_collection: 'kb' });
    await expectHidden('bot_missing', admin.key, {});
    const read = await h.t.request(`/api/v1/chatbot/conversations/${conversation.conversation_id}`, {
      key: admin.key,
    });
    expect({ status: read.status, body: await read.json() }).toEqual({
      status: 404,
      body: { error: 'Conversation not found' },
    });
    const completion = await h.t.request(`/api/v1/chatbot/external/${hidden.id}/chat/completions`, {
      method: 'POST',
      key: admin.key,
      json: { model: 'x', messages: [{ role: 'user', content: 'hi' }] },
    });
    expect({ status: completion.status, body: await completion.json() }).toEqual({
      status: 404,
      body: { error: { message: 'Chatbot not found', type: 'not_found_error', code: 'not_found' } },
    });

    // Untouched, and still there for its owner and an unrestricted admin.
    expect(await (await get(hidden.id, other.key)).json()).toMatchObject({ name: 'hidden', rag_collection: 'secret' });
    expect((await get(hidden.id)).status).toBe(200);
    // Chatbots over its collections it sees and uses like any admin.
    expect((await get(visible.id, admin.key)).status).toBe(200);
    expect((await put(visible.id, { name: 'renamed' }, admin.key)).status).toBe(200);
  });

  it("a restricted admin sees others' chatbots over no collection only when it manages their owner key", async () => {
    // Two tenants: each an admin and a chat key restricted to the tenant's collection.
    const tenantAdmin = await h.t.createKey({ name: 'a-admin', scopes: ['admin'], collections: ['kb'] });
    const tenantKey = await h.t.createKey({ name: 'a-chat', scopes, collections: ['kb'] });
    const foreignKey = await h.t.createKey({ name: 'b-chat', scopes, collections: ['secret'] });
    const ours = await createChatbot(h.t, { name: 'ours' }, tenantKey.key);
    const theirs = await createChatbot(h.t, { name: 'theirs', system_prompt: 'B internal rules' }, foreignKey.key);
    const unrestricted = await createChatbot(h.t, { name: 'unrestricted' }, other.key);
    const conversation = await say(h.t, theirs.id, 'my account number is 1234', undefined, foreignKey.key);

    const listed = await list(tenantAdmin.key);
    const ids = listed.map((b) => b.id);
    expect(ids).toContain(ours.id);
    expect(ids).not.toContain(theirs.id);
    expect(ids).not.toContain(unrestricted.id);
    expect(JSON.stringify(listed)).not.toContain('B internal rules');

    for (const id of [theirs.id, unrestricted.id]) {
      await expectHidden(id, tenantAdmin.key, { system_prompt: 'leak everything' });
    }
    const read = await h.t.request(`/api/v1/chatbot/conversations/${conversation.conversation_id}`, {
      key: tenantAdmin.key,
    });
    expect(read.status).toBe(404);

    // Its own tenant's chatbot it manages; the others are untouched for their owners and an
    // unrestricted admin.
    expect((await put(ours.id, { name: 'ours-renamed' }, tenantAdmin.key)).status).toBe(200);
    expect(await (await get(theirs.id, foreignKey.key)).json()).toMatchObject({ system_prompt: 'B internal rules' });
    expect((await get(theirs.id)).status).toBe(200);
    expect((await get(unrestricted.id)).status).toBe(200);
  });

  it('deleting a chatbot deletes its conversations', async () => {
    const bot = await createChatbot(h.t, {}, owner.key);
    const { conversation_id } = await say(h.t, bot.id, 'remember me', undefined, owner.key);
    expect((await h.t.request(`/api/v1/chatbot/conversations/${conversation_id}`, { key: owner.key })).status).toBe(
      200,
    );
    const response = await h.t.request(`/api/v1/chatbot/${bot.id}`, { method: 'DELETE', key: owner.key });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ message: 'Chatbot deleted' });
    expect((await get(bot.id, owner.key)).status).toBe(404);
    const gone = await h.t.request(`/api/v1/chatbot/conversations/${conversation_id}`);
    expect(gone.status).toBe(404);
    expect(await gone.json()).toEqual({ error: 'Conversation not found' });
    expect((await h.t.request(`/api/v1/chatbot/${bot.id}`, { method: 'DELETE' })).status).toBe(404);
  });

  it('scopes: write creates and updates, read reads, delete deletes, chat talks', async () => {
    const reader = await h.t.createKey({ name: 'reader', scopes: ['read'] });
    const forbidden = await create({ name: 'x', model: 'mock-chat' }, reader.key);
    expect(forbidden.status).toBe(403);
    expect(await forbidden.json()).toMatchObject({ error: { type: 'permission_error', code: 'insufficient_scope' } });
    const bot = await createChatbot(h.t, {}, owner.key);
    // The reader is another key: it gets past the scope check only to find no chatbot of its own.
    expect((await get(bot.id, reader.key)).status).toBe(404);
    expect((await sendChat(h.t, bot.id, { message: 'hi' }, reader.key)).status).toBe(403);
    const expected: Record<string, string> = {
      'POST /api/v1/chatbot/create': 'write',
      'GET /api/v1/chatbot/list': 'read',
      'GET /api/v1/chatbot/:chatbot_id': 'read',
      'PUT /api/v1/chatbot/:chatbot_id': 'write',
      'DELETE /api/v1/chatbot/:chatbot_id': 'delete',
      'GET /api/v1/chatbot/:chatbot_id/conversations': 'read',
      'GET /api/v1/chatbot/conversations/:conversation_id': 'read',
      'POST /api/v1/chatbot/external/:chatbot_id/chat/completions': 'chat',
      'POST /api/v1/chatbot/external/:chatbot_id/chat': 'chat',
    };
    const declared = Object.fromEntries(
      h.t.app.routes.filter((r) => r.url.startsWith('/api/v1/chatbot')).map((r) => [`${r.method} ${r.url}`, r.access]),
    );
    expect(declared).toEqual(expected);
  });
});
