import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { waitForDocument, type DocumentBody } from '../support/documents.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

/** A collection on an upstream embedding model, end to end against mock providers speaking OpenAI's wire format. */

let t: TestApp;
let primary: MockUpstream;
let secondary: MockUpstream;
let uploader: { id: string; key: string };
let searcher: { id: string; key: string };

const DIMENSIONS = 64;
const served = ['mock-embed', 'text-embedding-3-small', 'other-embed'];
const chat = 'mock-chat';

// Paragraphs long enough that the document becomes several chunks (CHUNK_TOKENS 200).
const topics = ['lighthouse keepers trimmed wicks', 'harbour pilots guided ships', 'bakers proofed sourdough'];
const paragraph = (topic: string, i: number) =>
  `${topic} ${i}. ` + Array.from({ length: 60 }, (_, j) => `${topic.split(' ')[j % 3]} detail${i}x${j}`).join(' ');
const longDocument = topics.flatMap((topic) => [0, 1].map((i) => paragraph(topic, i))).join('\n\n');

beforeAll(async () => {
  const mock = { models: [...served, chat], embeddingDimensions: DIMENSIONS, embeddingKind: 'words' as const };
  primary = await startMockUpstream({ ...mock, maxEmbeddingBatch: 2 });
  secondary = await startMockUpstream(mock);
  t = await startTestApp({
    gateway: {
      providers: [
        {
          name: 'primary',
          base_url: primary.url,
          models: [chat],
          embedding_models: served,
          embedding_batch_size: 2,
          max_retries: 0,
        },
        { name: 'secondary', base_url: secondary.url, models: [], embedding_models: served, priority: 1 },
      ],
      aliases: { 'house-embed': 'mock-embed' },
      retry: { max_retries: 0, base_delay_ms: 1, max_delay_ms: 5 },
      circuit_breaker: { failure_threshold: 1_000 },
    },
  });
  uploader = await t.createKey({ name: 'uploader', scopes: ['read', 'write'] });
  searcher = await t.createKey({ name: 'searcher', scopes: ['tools', 'embeddings'] });
}, 60_000);
afterAll(async () => {
  await t.close();
  await primary.close();
  await secondary.close();
});
beforeEach(() => {
  primary.reset();
  secondary.reset();
  primary.options.embeddingDimensions = DIMENSIONS;
  secondary.options.embeddingDimensions = DIMENSIONS;
});

const createCollection = (name: string, embeddingModel?: string) =>
  t.request('/api/v1/rag/collections', {
    method: 'POST',
    json: { name, ...(embeddingModel === undefined ? {} : { embedding_model: embeddingModel }) },
  });

const upload = async (collection: string, name: string, content: string): Promise<DocumentBody> => {
  const r = await t.request(`/api/v1/rag/collections/${collection}/documents`, {
    method: 'POST',
    key: uploader.key,
    json: { name, content },
  });
  expect(r.status, await r.clone().text()).toBe(202);
  const { id } = (await r.json()) as { id: string };
  return waitForDocument(t, id);
};

const search = (collection: string, query: string, extra: Record<string, unknown> = {}) =>
  t.request('/api/v1/agent/tool-calling', {
    method: 'POST',
    key: searcher.key,
    json: { tool_name: 'rag_search', parameters: { collection, query, similarity_threshold: -1, ...extra } },
  });

/** What the mock sent back on /v1/embeddings: inputs and the tokens it reported. */
const embeddingCalls = (mock: MockUpstream) =>
  mock.requests
    .filter((r) => r.path === '/v1/embeddings' && r.finished)
    .map((r) => ({
      input: r.body?.input as string[],
      tokens: (JSON.parse(r.sent) as { usage?: { prompt_tokens: number } }).usage?.prompt_tokens ?? 0,
    }));

async function usageOf(keyId: string): Promise<Record<string, number>> {
  await t.app.usage.flush();
  const rows = await queryRows<{ model: string; prompt_tokens: string }>(
    t.database.db,
    sql`select model, prompt_tokens from usage_daily where key_id = ${keyId}`,
  );
  return Object.fromEntries(rows.map((r) => [r.model, Number(r.prompt_tokens)]));
}

describe('a collection on an upstream embedding model', () => {
  let documentId: string;
  let chatbot: { id: string; key: string };

  it('is created with the dimensions one probe call measured, and records the provider', async () => {
    const r = await createCollection('harbour', 'house-embed');
    expect(r.status, await r.clone().text()).toBe(201);
    expect(await r.json()).toMatchObject({
      embedding_model: 'house-embed',
      embedding_provider: 'primary',
      embedding_model_resolved: 'mock-embed',
      dimensions: DIMENSIONS,
    });
    expect(embeddingCalls(primary).map((c) => c.input)).toEqual([['ragport dimension probe']]);
  });

  it('a provider down at creation: 502 and no collection (a later creation probes again)', async () => {
    primary.inject({ kind: 'status', status: 503 });
    secondary.inject({ kind: 'status', status: 503 });
    const r = await createCollection('too-early', 'other-embed');
    expect(r.status).toBe(502);
    expect(await r.json()).toEqual({ error: "Embedding model 'other-embed': Provider secondary answered HTTP 503" });
    expect((await t.request('/api/v1/rag/collections/too-early')).status).toBe(404);
    const later = await createCollection('too-early', 'other-embed');
    expect(later.status).toBe(201);
    expect(await later.json()).toMatchObject({ dimensions: DIMENSIONS });
  });

  it('embeds the chunks upstream in batches and counts the tokens against the uploading key', async () => {
    const doc = await upload('harbour', 'harbour.txt', longDocument);
    expect(doc.status, doc.error ?? '').toBe('processed');
    expect(doc.chunk_count).toBeGreaterThanOrEqual(3);
    documentId = doc.id;
    const calls = embeddingCalls(primary);
    // The provider's embedding_batch_size (2) splits the worker's batch; every chunk went once.
    expect(calls.every((c) => c.input.length <= 2)).toBe(true);
    expect(calls.flatMap((c) => c.input)).toHaveLength(doc.chunk_count);
    expect(calls.every((c) => c.input.every((text) => text.length > 0))).toBe(true);
    const tokens = calls.reduce((n, c) => n + c.tokens, 0);
    expect(tokens).toBeGreaterThan(0);
    expect(await usageOf(uploader.id)).toEqual({ 'mock-embed': tokens });
    const [stored] = await queryRows<{ model: string; dims: number }>(
      t.database.db,
      sql`select distinct model, vector_dims(embedding) as dims from chunks where document_id = ${doc.id}`,
    );
    expect(stored).toEqual({ model: 'mock-embed', dims: DIMENSIONS });
  });

  it('embeds queries upstream: search finds the document, and the searching key pays for the query', async () => {
    for (const mode of ['dense', 'hybrid'] as const) {
      const r = await search('harbour', 'harbour pilots guided ships', { mode, top_k: 2 });
      expect(r.status, await r.clone().text()).toBe(200);
      const { results } = (await r.json()) as { results: { document_id: string; content: string }[] };
      expect(results[0]?.document_id).toBe(documentId);
      expect(results[0]?.content).toContain('harbour pilots guided ships');
    }
    const queries = embeddingCalls(primary);
    expect(queries.map((c) => c.input)).toEqual([['harbour pilots guided ships'], ['harbour pilots guided ships']]);
    expect(await usageOf(searcher.id)).toEqual({ 'mock-embed': (queries[0]?.tokens ?? 0) * 2 });
  });

  it('chatbots retrieve through it too, the chatting key paying for the query', async () => {
    const chatter = await t.createKey({ name: 'chatter', scopes: ['write', 'chat'] });
    const created = await t.request('/api/v1/chatbot/create', {
      method: 'POST',
      key: chatter.key,
      json: {
        name: 'pilot',
        model: chat,
        use_rag: true,
        rag_collection: 'harbour',
        rag_similarity_threshold: 0,
        fallback_responses: ['for the chat model only'],
      },
    });
    expect(created.status, await created.clone().text()).toBe(201);
    const { id } = (await created.json()) as { id: string };
    chatbot = { id, key: chatter.key };
    const r = await t.request(`/api/v1/chatbot/external/${id}/chat`, {
      method: 'POST',
      key: chatter.key,
      json: { message: 'What did harbour pilots do with ships?' },
    });
    expect(r.status, await r.clone().text()).toBe(200);
    const { sources } = (await r.json()) as { sources?: { document_id: string }[] };
    expect(sources?.[0]?.document_id).toBe(documentId);
    const [query] = embeddingCalls(primary);
    expect(query?.input).toEqual(['What did harbour pilots do with ships?']);
    expect(await usageOf(chatter.id)).toMatchObject({ 'mock-embed': query?.tokens, [chat]: expect.any(Number) });
  });

  it('fails over to the next provider serving the model, for chunks and queries alike', async () => {
    primary.inject({ kind: 'status', status: 503 }, 100);
    const doc = await upload('harbour', 'fog.txt', 'Fog signals sounded when the lighthouse beam could not be seen.');
    expect(doc.status, doc.error ?? '').toBe('processed');
    expect(secondary.count('/v1/embeddings')).toBeGreaterThan(0);
    const r = await search('harbour', 'fog signals', { mode: 'dense', top_k: 1 });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { results: { document_id: string }[] }).results[0]?.document_id).toBe(doc.id);
  });

  it('provider down: the document is retried with backoff, then fails with the reason', async () => {
    primary.inject({ kind: 'status', status: 503 }, 1_000);
    secondary.inject({ kind: 'status', status: 503 }, 1_000);
    const doc = await upload('harbour', 'down.txt', 'Written while every embedding provider was down.');
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatch(/^Embedding model 'mock-embed': Provider (primary|secondary) answered HTTP 503$/);
    const [job] = await queryRows<{ attempts: number; max_attempts: number; status: string }>(
      t.database.db,
      sql`select attempts, max_attempts, status from ingestion_jobs where document_id = ${doc.id}`,
    );
    expect(job).toEqual({ attempts: job?.max_attempts, max_attempts: 3, status: 'failed' });
    // Each attempt asked both providers (no retries configured): failover, then the job's own retry.
    expect(primary.count('/v1/embeddings')).toBe(3);
    expect(secondary.count('/v1/embeddings')).toBe(3);
  }, 30_000);

  it('provider down: a search answers 502 in the tools error shape, naming the model', async () => {
    primary.inject({ kind: 'status', status: 503 }, 10);
    secondary.inject({ kind: 'status', status: 500 }, 10);
    const r = await search('harbour', 'lighthouse');
    expect(r.status).toBe(502);
    expect(await r.json()).toEqual({ error: "Embedding model 'mock-embed': Provider secondary answered HTTP 500" });
  });

  it('provider down: a chatbot turn over the collection is that error (fallbacks stand in for the chat model only)', async () => {
    primary.inject({ kind: 'status', status: 503 }, 10);
    secondary.inject({ kind: 'status', status: 503 }, 10);
    const r = await t.request(`/api/v1/chatbot/external/${chatbot.id}/chat`, {
      method: 'POST',
      key: chatbot.key,
      json: { message: 'What did harbour pilots do with ships?' },
    });
    expect(r.status).toBe(502);
    expect(await r.json()).toEqual({ error: "Embedding model 'mock-embed': Provider secondary answered HTTP 503" });
    expect(primary.count('/v1/chat/completions')).toBe(0);
  });

  it('vectors of another length (a provider now serving another model) are refused, never stored or compared', async () => {
    primary.inject({ kind: 'status', status: 503 }, 10);
    secondary.options.embeddingDimensions = 32;
    const r = await search('harbour', 'lighthouse');
    expect(r.status).toBe(502);
    expect(await r.json()).toEqual({
      error:
        "Embedding model 'mock-embed': the provider returned 32-dimensional vectors, not the 64 this model was fixed to",
    });
  });

  it('no configured provider serves the model any more: search is a 503 saying so', async () => {
    const other = await startTestApp({ database: t.database, config: { ingestionConcurrency: 0 } });
    try {
      const r = await other.request('/api/v1/agent/tool-calling', {
        method: 'POST',
        key: searcher.key,
        json: { tool_name: 'rag_search', parameters: { collection: 'harbour', query: 'lighthouse' } },
      });
      expect(r.status).toBe(503);
      expect(await r.json()).toEqual({
        error:
          "Embedding model 'mock-embed' is served by no configured provider (it was 'primary' when the collection was created)",
      });
    } finally {
      await other.close();
    }
  });
});

describe('which model a name means', () => {
  it('/embeddings and collections resolve a name the same way: upstream when a provider serves it', async () => {
    const r = await t.request('/api/v1/embeddings', {
      method: 'POST',
      key: searcher.key,
      json: { model: 'house-embed', input: ['first text', 'second text'] },
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-ragport-embedding-model')).toBe('mock-embed');
    const body = (await r.json()) as { data: { embedding: number[] }[]; usage: { prompt_tokens: number } };
    expect(body.data.map((d) => d.embedding.length)).toEqual([DIMENSIONS, DIMENSIONS]);
    expect(body.usage.prompt_tokens).toBe(4);

    const small = await createCollection('small', 'text-embedding-3-small');
    expect(await small.json()).toMatchObject({ embedding_provider: 'primary', dimensions: DIMENSIONS });
  });

  it('the default text-embedding-ada-002 is the local model when no provider serves it', async () => {
    const r = await createCollection('default-model');
    expect(r.status).toBe(201);
    expect(await r.json()).toMatchObject({
      embedding_model: 'text-embedding-ada-002',
      embedding_provider: 'local',
      embedding_model_resolved: t.config.embeddingModel,
      dimensions: 384,
    });
  });

  it('an unknown name is a 400; a provider whose model list is unreadable makes OpenAI names a 503, not a silent local model', async () => {
    const unknown = await createCollection('nope', 'no-such-embed');
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toEqual({ error: "Unknown embedding model 'no-such-embed'" });

    const down = await startMockUpstream({ models: ['text-embedding-ada-002'], modelsStatus: 500 });
    const other = await startTestApp({
      database: t.database,
      gateway: { providers: [{ name: 'openai', base_url: down.url }] },
    });
    try {
      const r = await other.request('/api/v1/rag/collections', { method: 'POST', json: { name: 'later' } });
      expect(r.status).toBe(503);
      expect(((await r.json()) as { error: string }).error).toBe(
        "Embedding model 'text-embedding-ada-002' is unavailable: the model list of provider openai could not be read, and it may serve 'text-embedding-ada-002'; retry later",
      );
      // /embeddings alike, with the wait the OpenAI SDKs honour before retrying.
      const embed = await other.request('/api/v1/embeddings', {
        method: 'POST',
        json: { model: 'text-embedding-ada-002', input: 'x' },
      });
      expect(embed.status).toBe(503);
      expect(embed.headers.get('retry-after')).toBe('5');
    } finally {
      await other.close();
      await down.close();
    }
  });
});
