import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ChatResponse, ConversationDetail, Source } from '../../src/chatbots/chatbots.schemas.ts';
import { countPromptTokens, messageTokens, tokenCounter } from '../../src/gateway/tokens.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import {
  completions,
  createChatbot,
  lastPrompt,
  say,
  sendChat,
  startChatbotHarness,
  type ChatbotHarness,
} from './chatbots.support.ts';

let h: ChatbotHarness;
const lighthouse =
  'Lighthouse keepers tended the lamps through the night, trimming wicks, winding the clockwork that turned the lens, ' +
  'and logging the weather every four hours. Keepers lived on the rock with their families for months at a time, ' +
  'received supplies by boat when the sea allowed, and painted the tower each summer so ships could tell it apart ' +
  'from the neighbouring lights. Automation in the twentieth century replaced them with timers, light sensors and ' +
  'remote monitoring, and the last keepers left their stations in the nineteen nineties, ending a trade that had ' +
  'lasted for centuries along every rocky coast.';

beforeAll(async () => {
  // RAGPORT_CONFIG's context_windows: mock-small has a small one, mock-chat the default (8192).
  h = await startChatbotHarness({ models: ['mock-chat', 'mock-small'], contextWindows: { 'mock-small': 700 } });
  await createCollection(h.t, 'kb');
  const docs: [string, string, Record<string, unknown>?][] = [
    ['cats.txt', 'Cats are small domesticated felines. They purr when content and hunt mice.'],
    ['dogs.txt', 'Dogs are loyal domesticated canines that bark and love long walks.'],
    ['rockets.txt', 'Rockets burn liquid oxygen and kerosene to reach orbit.', { title: 'Rocket Science' }],
    ['orders.txt', 'Order 83741-ZQ was shipped to the warehouse in Rotterdam on Monday.'],
    ['revenue.txt', 'Quarterly revenue grew twelve percent thanks to strong subscription sales.'],
    ['lighthouses.txt', lighthouse],
  ];
  for (const [name, content, metadata] of docs) {
    const response = await h.t.request('/api/v1/rag/collections/kb/documents', {
      method: 'POST',
      json: { name, content, ...(metadata ? { metadata } : {}) },
    });
    expect(response.status).toBe(202);
    const { id } = (await response.json()) as { id: string };
    expect((await waitForDocument(h.t, id)).status).toBe('processed');
  }
}, 120_000);
afterAll(async () => {
  await h.close();
});
beforeEach(() => h.mock.reset());

const rag = (extra: Record<string, unknown> = {}, key?: string) =>
  createChatbot(h.t, { system_prompt: 'You answer questions.', use_rag: true, rag_collection: 'kb', ...extra }, key);
const titles = (sources: Source[] | undefined) => (sources ?? []).map((s) => s.title);
const systemMessage = () => lastPrompt(h.mock)[0]?.content ?? '';

describe('retrieval in chatbots', () => {
  it('gives the model the retrieved chunks as numbered sources in a delimited context, and returns the sources', async () => {
    const bot = await rag();
    const reply = await say(h.t, bot.id, 'Which animal purrs when it is content?');
    expect(reply.sources?.[0]).toEqual({
      title: 'cats.txt',
      content: 'Cats are small domesticated felines. They purr when content and hunt mice.',
      score: expect.any(Number),
      document_id: expect.stringMatching(/^doc_/),
    });
    for (const source of reply.sources ?? []) expect(source.score).toBeGreaterThanOrEqual(0.3);

    const prompt = lastPrompt(h.mock);
    expect(prompt).toHaveLength(2);
    expect(prompt[1]).toEqual({ role: 'user', content: 'Which animal purrs when it is content?' });
    const system = systemMessage();
    expect(system.startsWith('You answer questions.\n\n')).toBe(true);
    const context = /<context>\n([\s\S]*)\n<\/context>$/.exec(system)?.[1] ?? '';
    const numbered = (reply.sources ?? []).map((s, i) => `[${i + 1}] ${s.title}\n${s.content}`);
    expect(context).toBe(numbered.join('\n\n'));

    // Stored with the reply, shown with the conversation.
    const detail = (await (
      await h.t.request(`/api/v1/chatbot/conversations/${reply.conversation_id}`)
    ).json()) as ConversationDetail;
    expect(detail.messages[1]?.sources).toEqual(reply.sources);
    expect(detail.messages[0]?.sources).toBeNull();
  });

  it('without use_rag: no context for the model, no sources in the response', async () => {
    const bot = await createChatbot(h.t, { system_prompt: 'You answer questions.', rag_collection: 'kb' });
    const response = await sendChat(h.t, bot.id, { message: 'Which animal purrs?' });
    const body = (await response.json()) as ChatResponse;
    expect(body).not.toHaveProperty('sources');
    expect(lastPrompt(h.mock)[0]).toEqual({ role: 'system', content: 'You answer questions.' });
    const completion = (await (
      await completions(h.t, bot.id, { messages: [{ role: 'user', content: 'Which animal purrs?' }] })
    ).json()) as Record<string, unknown>;
    expect(completion).not.toHaveProperty('sources');
    expect(systemMessage()).toBe('You answer questions.');
  });

  it('honours top_k and the similarity threshold', async () => {
    const question = 'Which animal purrs when it is content?';
    const all = await rag({ rag_top_k: 3, rag_similarity_threshold: -1 });
    const three = (await say(h.t, all.id, question)).sources ?? [];
    expect(three).toHaveLength(3);
    expect(systemMessage()).toContain('\n\n[3] ');
    expect(systemMessage()).not.toContain('[4] ');

    const two = await rag({ rag_top_k: 2, rag_similarity_threshold: -1 });
    expect((await say(h.t, two.id, question)).sources).toHaveLength(2);

    // The cat chunk scores between 0.45 and 0.6; every other chunk far lower.
    const cat = three.find((s) => s.title === 'cats.txt');
    expect(cat?.score).toBeGreaterThan(0.45);
    expect(cat?.score).toBeLessThan(0.6);
    const middle = await rag({ rag_top_k: 5, rag_similarity_threshold: 0.45 });
    expect(titles((await say(h.t, middle.id, question)).sources)).toEqual(['cats.txt']);
    const strict = await rag({ rag_top_k: 5, rag_similarity_threshold: 0.6 });
    expect((await say(h.t, strict.id, question)).sources).toEqual([]);
    expect(systemMessage()).toMatch(/<context>\nNo sources are available for this question\.\n<\/context>$/);
  });

  it("a source's title is the document's metadata title, else its name; long chunks come back as an excerpt", async () => {
    const bot = await rag({ rag_top_k: 1 });
    expect(titles((await say(h.t, bot.id, 'What fuel do rockets burn to reach orbit?')).sources)).toEqual([
      'Rocket Science',
    ]);
    const [source] = (await say(h.t, bot.id, 'What did lighthouse keepers do at night?')).sources ?? [];
    expect(source?.title).toBe('lighthouses.txt');
    expect(source?.content.length).toBeLessThanOrEqual(501);
    expect(source?.content.endsWith('…')).toBe(true);
    expect(lighthouse.startsWith(source?.content.slice(0, -1) ?? 'x')).toBe(true);
    // The model got the whole chunk.
    expect(systemMessage()).toContain('along every rocky coast.');
  });

  it('a follow-up too short to stand alone is searched together with the previous user turn', async () => {
    const bot = await rag({ rag_top_k: 1 });
    // Alone, "When did it arrive?" finds the order; after a question about rockets, "it" is the rocket.
    expect(titles((await say(h.t, bot.id, 'When did it arrive?')).sources)).toEqual(['orders.txt']);
    const { conversation_id } = await say(h.t, bot.id, 'Tell me about the rocket engines');
    expect(titles((await say(h.t, bot.id, 'When did it arrive?', conversation_id)).sources)).toEqual([
      'Rocket Science',
    ]);
    // The same through the completions endpoint, where the caller sends the history.
    const followUp = async (previous: string, last: string) => {
      const response = await completions(h.t, bot.id, {
        messages: [
          { role: 'user', content: previous },
          { role: 'assistant', content: 'ok' },
          { role: 'user', content: last },
        ],
      });
      return titles(((await response.json()) as { sources: Source[] }).sources);
    };
    expect(await followUp('Tell me about the rocket engines', 'When did it arrive?')).toEqual(['Rocket Science']);
    expect(await followUp('Where was order 83741-ZQ shipped?', 'When did it arrive?')).toEqual(['orders.txt']);
    // A question that stands on its own is searched alone.
    const two = await rag({ rag_top_k: 2, rag_similarity_threshold: 0.2 });
    const standalone = await completions(h.t, two.id, {
      messages: [
        { role: 'user', content: 'Tell me about the rocket engines' },
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: 'Which small domesticated animal likes to purr and hunt mice?' },
      ],
    });
    expect(titles(((await standalone.json()) as { sources: Source[] }).sources)).not.toContain('Rocket Science');
  });

  it("a key's collection restriction applies on every use", async () => {
    const key = await h.t.createKey({ name: 'kb-only', scopes: ['write', 'chat'], collections: ['kb'] });
    const bot = await rag({}, key.key);
    expect((await sendChat(h.t, bot.id, { message: 'Which animal purrs?' }, key.key)).status).toBe(200);
    const patched = await h.t.request(`/api/v1/keys/${key.id}`, { method: 'PATCH', json: { collections: ['other'] } });
    expect(patched.status).toBe(200);
    const refused = await sendChat(h.t, bot.id, { message: 'Which animal purrs?' }, key.key);
    expect(refused.status).toBe(404);
    expect(await refused.json()).toEqual({ error: 'Collection not found' });
    const structured = await completions(h.t, bot.id, { messages: [{ role: 'user', content: 'hi' }] }, key.key);
    expect(structured.status).toBe(404);
    expect(await structured.json()).toMatchObject({ error: { message: 'Collection not found', code: 'not_found' } });
    expect(h.mock.requests).toHaveLength(1);
  });
});

describe('the prompt budget', () => {
  const question = 'Which animal purrs when it is content?';
  const filler = (i: number) => `Turn ${i}: ${'the quick brown fox jumps over the lazy dog '.repeat(12)}`;
  const history = Array.from({ length: 6 }, (_, i) => [
    { role: 'user', content: filler(i) },
    { role: 'assistant', content: `ok ${i}` },
  ]).flat();
  type Message = { role: string; content: string };
  const ask = async (botId: string, messages: Message[], budget: number) => {
    // The default context window is 8192 tokens; the room kept for the reply sets the budget.
    const response = await completions(h.t, botId, { messages, max_tokens: 8192 - budget });
    expect(response.status).toBe(200);
    const prompt = lastPrompt(h.mock) as Message[];
    return {
      prompt,
      tokens: await countPromptTokens(prompt as never),
      sources: ((await response.json()) as { sources: Source[] }).sources,
    };
  };

  it('drops the oldest history first, then the lowest-scored sources, never the system prompt or the message', async () => {
    const bot = await rag({ rag_top_k: 3, rag_similarity_threshold: -1, memory_length: 100 });
    const messages = [...history, { role: 'user', content: question }];
    const full = await ask(bot.id, messages, 8000);
    expect(full.prompt.slice(1)).toEqual(messages);
    expect(full.sources).toHaveLength(3);
    const bare = await ask(bot.id, [{ role: 'user', content: question }], 8000);
    expect(bare.prompt[0]).toEqual(full.prompt[0]);

    // Room for part of the history: the newest messages stay, all sources stay.
    const budget = Math.floor((full.tokens + bare.tokens) / 2);
    const half = await ask(bot.id, messages, budget);
    expect(half.tokens).toBeLessThanOrEqual(budget);
    const kept = half.prompt.slice(1, -1);
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(history.length);
    expect(kept).toEqual(history.slice(history.length - kept.length));
    const count = await tokenCounter();
    const nextOlder = history[history.length - kept.length - 1] as Message;
    expect(half.tokens + messageTokens(count, nextOlder as never)).toBeGreaterThan(budget);
    expect(half.prompt[0]).toEqual(full.prompt[0]);
    expect(half.sources).toEqual(full.sources);

    // Not even room for all sources: no history, and the lowest-scored source goes.
    const tight = await ask(bot.id, messages, bare.tokens - 1);
    expect(tight.tokens).toBeLessThanOrEqual(bare.tokens - 1);
    expect(tight.prompt).toHaveLength(2);
    const lowest = Math.min(...full.sources.map((s) => s.score));
    expect(tight.sources).toEqual(full.sources.filter((s) => s.score !== lowest));
    expect(tight.prompt[0]?.content).toContain(`[1] ${tight.sources[0]?.title}`);
    expect(tight.prompt[0]?.content).not.toContain('[3] ');

    // No room at all: the system prompt and the message still go.
    const none = await ask(bot.id, messages, 1);
    expect(none.prompt).toHaveLength(2);
    expect(none.prompt[0]?.content.startsWith('You answer questions.')).toBe(true);
    expect(none.prompt[1]).toEqual({ role: 'user', content: question });
    expect(none.sources).toEqual([]);
  });

  it('the context window is configurable per model', async () => {
    const messages = [...history, { role: 'user', content: 'And then?' }];
    const sent = async (model: string) => {
      const bot = await createChatbot(h.t, { model, memory_length: 100, max_tokens: 200 });
      expect((await completions(h.t, bot.id, { messages })).status).toBe(200);
      return lastPrompt(h.mock);
    };
    const small = await sent('mock-small');
    expect(await countPromptTokens(small as never)).toBeLessThanOrEqual(700 - 200);
    expect(small.length).toBeLessThan(messages.length + 1);
    expect(await sent('mock-chat')).toHaveLength(messages.length + 1);
  });
});

describe('stored sources and keys restricted to collections', () => {
  it("a conversation shows a restricted key only the sources of collections it may use, after the chatbot's collection changed", async () => {
    await createCollection(h.t, 'other-kb');
    const upload = await h.t.request('/api/v1/rag/collections/other-kb/documents?wait=true', {
      method: 'POST',
      json: { name: 'plain.txt', content: 'Plain notes about gardening, compost and tomato seedlings.' },
    });
    expect(upload.status).toBe(200);
    // An unrestricted owner's chatbot quotes kb, then moves to other-kb.
    const owner = await h.t.createKey({ name: 'bot-owner', scopes: ['read', 'write', 'chat'] });
    const bot = await rag({ rag_similarity_threshold: 0 }, owner.key);
    const first = await say(h.t, bot.id, 'What did lighthouse keepers do?', undefined, owner.key);
    expect(titles(first.sources)).toContain('lighthouses.txt');
    const moved = await h.t.request(`/api/v1/chatbot/${bot.id}`, {
      method: 'PUT',
      key: owner.key,
      json: { rag_collection: 'other-kb' },
    });
    expect(moved.status).toBe(200);
    const second = await say(h.t, bot.id, 'What about tomato seedlings?', first.conversation_id, owner.key);
    expect(titles(second.sources)).toContain('plain.txt');

    const read = async (key: string) => {
      const response = await h.t.request(`/api/v1/chatbot/conversations/${first.conversation_id}`, { key });
      expect(response.status).toBe(200);
      return (await response.json()) as ConversationDetail;
    };
    // An admin key restricted to other-kb sees the chatbot (its collection is other-kb) and the
    // conversation, but none of kb's text.
    const narrow = await h.t.createKey({ name: 'narrow-admin-2', scopes: ['admin'], collections: ['other-kb'] });
    const seen = await read(narrow.key);
    expect(seen.messages).toHaveLength(4);
    expect(seen.messages[1]?.sources).toEqual([]);
    expect(titles(seen.messages[3]?.sources ?? [])).toEqual(titles(second.sources));
    expect(JSON.stringify(seen)).not.toContain('Lighthouse keepers tended');
    // The owner, unrestricted, sees every source as stored.
    const whole = await read(owner.key);
    expect(whole.messages[1]?.sources).toEqual(first.sources);
  });
});
