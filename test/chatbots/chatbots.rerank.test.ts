import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';
import { createChatbot, lastContent, say } from './chatbots.support.ts';

// A chatbot's opt-in rerank stage: the fused candidates go to the rerank model before top k.

let mock: MockUpstream;
let t: TestApp;
beforeAll(async () => {
  mock = await startMockUpstream({
    models: ['mock-chat', 'mock-reranker'],
    reply: (body) => `re: ${lastContent(body)}`,
  });
  t = await startTestApp({
    gateway: {
      providers: [{ name: 'mock', base_url: mock.url, models: ['mock-chat'], rerank_models: ['mock-reranker'] }],
    },
  });
  await createCollection(t, 'kb');
  for (const [name, content] of [
    ['cats.txt', 'Cats are small domesticated felines. They purr when content and hunt mice.'],
    ['dogs.txt', 'Dogs are loyal domesticated canines that bark and love long walks.'],
    ['rockets.txt', 'Rockets burn liquid oxygen and kerosene to reach orbit.'],
  ]) {
    const r = await t.request('/api/v1/rag/collections/kb/documents', { method: 'POST', json: { name, content } });
    const { id } = (await r.json()) as { id: string };
    expect((await waitForDocument(t, id)).status).toBe('processed');
  }
}, 120_000);
afterAll(async () => {
  await t.close();
  await mock.close();
});

describe('chatbot rerank', () => {
  it('reranks the fused candidates when rag_rerank is set, and not otherwise', async () => {
    const base = {
      model: 'mock-chat',
      use_rag: true,
      rag_collection: 'kb',
      rag_top_k: 1,
      rag_similarity_threshold: -1,
    };
    const plain = await createChatbot(t, base);
    expect((plain as { rag_rerank: unknown }).rag_rerank).toBeNull();
    await say(t, plain.id, 'Which animal purrs when content?');
    expect(mock.count('/v1/rerank')).toBe(0);

    const reranked = await createChatbot(t, { ...base, rag_rerank: { model: 'mock-reranker', candidates: 3 } });
    expect((reranked as { rag_rerank: unknown }).rag_rerank).toEqual({ model: 'mock-reranker', candidates: 3 });
    const reply = await say(t, reranked.id, 'Which animal purrs when content?');
    expect(mock.count('/v1/rerank')).toBe(1);
    const sent = mock.requests.find((r) => r.path === '/v1/rerank')?.body as { query: string; documents: unknown[] };
    expect(sent.documents.length).toBe(3);
    expect(reply.sources?.map((s) => s.title)).toEqual(['cats.txt']);

    const off = await t.request(`/api/v1/chatbot/${reranked.id}`, { method: 'PUT', json: { rag_rerank: null } });
    expect(off.status).toBe(200);
  });

  it('a key over its token quota is refused before retrieval (no rerank call), on either endpoint', async () => {
    const key = await t.createKey({ name: 'quota', scopes: ['write', 'chat'], quota: { tokens_per_month: 1 } });
    const bot = await createChatbot(
      t,
      {
        model: 'mock-chat',
        use_rag: true,
        rag_collection: 'kb',
        rag_similarity_threshold: -1,
        rag_rerank: { model: 'mock-reranker', candidates: 3 },
      },
      key.key,
    );
    // The quota spent by a plain chat completion.
    const spent = await t.request('/api/v1/chat/completions', {
      method: 'POST',
      json: { model: 'mock-chat', messages: [{ role: 'user', content: 'Which animal purrs?' }] },
      key: key.key,
    });
    expect(spent.status).toBe(200);
    await t.app.usage.flush();
    mock.reset();
    const chat = await t.request(`/api/v1/chatbot/external/${bot.id}/chat`, {
      method: 'POST',
      json: { message: 'And which barks?' },
      key: key.key,
    });
    expect(chat.status).toBe(403);
    // A 403 is structured on every endpoint (the contract), /chat included.
    expect(await chat.json()).toMatchObject({ error: { code: 'quota_exceeded', type: 'permission_error' } });
    const completions = await t.request(`/api/v1/chatbot/external/${bot.id}/chat/completions`, {
      method: 'POST',
      json: { model: 'x', messages: [{ role: 'user', content: 'And which barks?' }] },
      key: key.key,
    });
    expect(completions.status).toBe(403);
    expect(await completions.json()).toMatchObject({ error: { code: 'quota_exceeded' } });
    expect(mock.requests.map((r) => r.path)).toEqual([]);
  });

  it('refuses a rerank stage out of bounds', async () => {
    const r = await t.request('/api/v1/chatbot/create', {
      method: 'POST',
      json: { name: 'x', model: 'mock-chat', rag_rerank: { model: 'mock-reranker', candidates: 0 } },
    });
    expect(r.status).toBe(400);
  });

  it('refuses a rerank model no provider serves, on create and on update (every turn would be a 404)', async () => {
    const created = await t.request('/api/v1/chatbot/create', {
      method: 'POST',
      json: { name: 'x', model: 'mock-chat', rag_rerank: { model: 'nope-rerank', candidates: 5 } },
    });
    expect(created.status).toBe(404);
    expect(await created.json()).toEqual({ error: "No provider serves the rerank model 'nope-rerank'" });
    const bot = await createChatbot(t, { name: 'y', model: 'mock-chat' });
    const updated = await t.request(`/api/v1/chatbot/${bot.id}`, {
      method: 'PUT',
      json: { rag_rerank: { model: 'nope-rerank', candidates: 5 } },
    });
    expect(updated.status).toBe(404);
    const served = await t.request(`/api/v1/chatbot/${bot.id}`, {
      method: 'PUT',
      json: { rag_rerank: { model: 'mock-reranker', candidates: 5 } },
    });
    expect(served.status).toBe(200);
  });
});
