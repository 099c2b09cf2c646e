import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AppError, statusOf } from '../../src/http/errors.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

let first: MockUpstream;
let second: MockUpstream;
let t: TestApp;

beforeAll(async () => {
  first = await startMockUpstream({ models: ['mock-embed'], maxEmbeddingBatch: 3, embeddingDimensions: 4 });
  second = await startMockUpstream({ models: ['mock-embed'], embeddingDimensions: 4 });
  t = await startTestApp({
    gateway: {
      providers: [
        { name: 'first', base_url: first.url, models: [], embedding_models: ['mock-embed'], embedding_batch_size: 3 },
        { name: 'second', base_url: second.url, models: [], embedding_models: ['mock-embed'], priority: 1 },
      ],
      aliases: { small: 'mock-embed' },
      retry: { max_retries: 1, base_delay_ms: 1 },
    },
  });
});
afterAll(async () => {
  await t.close();
  await first.close();
  await second.close();
});
beforeEach(() => {
  first.reset();
  second.reset();
});

/** The vectors the mock computes, asked for as floats directly. */
async function direct(inputs: string[]): Promise<number[][]> {
  const response = await fetch(`${second.url}/embeddings`, {
    method: 'POST',
    body: JSON.stringify({ model: 'mock-embed', input: inputs }),
  });
  const body = (await response.json()) as { data: { embedding: number[] }[] };
  return body.data.map((d) => d.embedding);
}

describe('upstream embedding backends', () => {
  it('resolves models served upstream (aliases too) and nothing else', async () => {
    expect((await t.app.gateway.embeddingBackend('mock-embed'))?.model).toBe('mock-embed');
    expect((await t.app.gateway.embeddingBackend('small'))?.model).toBe('small');
    expect(await t.app.gateway.embeddingBackend('unknown-embed')).toBeUndefined();
    expect(await t.app.gateway.embeddingBackend('mock-chat')).toBeUndefined();
  });

  it('splits inputs into batches of the provider limit and keeps input order', async () => {
    const backend = await t.app.gateway.embeddingBackend('small');
    const inputs = ['a', 'b c', 'd e f', 'g', 'h i', 'j', 'k l m n'];
    const result = await backend?.embed(inputs);
    expect(first.requests.map((r) => (r.body?.input as string[]).length).sort()).toEqual([1, 3, 3]);
    expect(first.requests.every((r) => r.body?.model === 'mock-embed' && r.body.encoding_format === 'base64')).toBe(
      true,
    );
    expect(result?.vectors).toEqual(await direct(inputs));
    expect(result?.promptTokens).toBe(14);
  });

  it('retries and fails over like chat', async () => {
    first.inject({ kind: 'status', status: 500 }, 2);
    const backend = await t.app.gateway.embeddingBackend('mock-embed');
    const result = await backend?.embed(['x y']);
    expect(result?.vectors).toEqual(await direct(['x y']));
    expect(first.count('/v1/embeddings')).toBe(2);
    expect(second.count('/v1/embeddings')).toBe(2);
  });

  it('rejects with AppErrors: upstream 4xx passed through, 5xx as 502', async () => {
    const backend = await t.app.gateway.embeddingBackend('mock-embed');
    first.inject({ kind: 'status', status: 400, message: 'input too long' });
    const client = await backend?.embed(['x']).catch((e: unknown) => e);
    expect(client).toBeInstanceOf(AppError);
    expect(client).toMatchObject({ message: 'input too long' });
    expect(statusOf(client as AppError)).toBe(400);

    first.inject({ kind: 'status', status: 503 }, 2);
    second.inject({ kind: 'status', status: 503 }, 2);
    const down = await backend?.embed(['x']).catch((e: unknown) => e);
    expect(down).toMatchObject({ code: 'upstream_error' });
    expect(statusOf(down as AppError)).toBe(502);
  });
});

describe('POST /api/v1/embeddings on an upstream model', () => {
  it('dimensions goes to the provider, and the vectors come back at that length', async () => {
    const response = await t.request('/api/v1/embeddings', {
      method: 'POST',
      json: { model: 'small', input: ['one', 'two'], dimensions: 2 },
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { data: { embedding: number[] }[] };
    expect(body.data.map((d) => d.embedding.length)).toEqual([2, 2]);
    // (An earlier request may be the one-time probe that measures the model's own length.)
    expect(first.requests.filter((r) => r.path === '/v1/embeddings').at(-1)?.body).toMatchObject({
      model: 'mock-embed',
      input: ['one', 'two'],
      dimensions: 2,
    });
    // Without it, the model's own length.
    const plain = (await (
      await t.request('/api/v1/embeddings', { method: 'POST', json: { model: 'small', input: 'one' } })
    ).json()) as { data: { embedding: number[] }[] };
    expect(plain.data[0]?.embedding).toHaveLength(4);
  });

  it("user and fields ragport does not know reach the provider as sent; model, input and format stay ragport's", async () => {
    const response = await t.request('/api/v1/embeddings', {
      method: 'POST',
      json: {
        model: 'small',
        input: ['query text'],
        user: 'user-42',
        input_type: 'query',
        task: 'retrieval.query',
        truncate: 'END',
        encoding_format: 'float',
      },
    });
    expect(response.status).toBe(200);
    expect(first.requests.filter((r) => r.path === '/v1/embeddings').at(-1)?.body).toEqual({
      model: 'mock-embed',
      input: ['query text'],
      encoding_format: 'base64',
      user: 'user-42',
      input_type: 'query',
      task: 'retrieval.query',
      truncate: 'END',
    });
    // A null user (clients that send every field) is left out, as its default.
    await t.request('/api/v1/embeddings', { method: 'POST', json: { model: 'small', input: 'x', user: null } });
    expect(first.requests.filter((r) => r.path === '/v1/embeddings').at(-1)?.body).not.toHaveProperty('user');
  });

  it('token ids reach the provider as the text they encode', async () => {
    const response = await t.request('/api/v1/embeddings', {
      method: 'POST',
      json: { model: 'small', input: [[15339, 1917]] },
    });
    expect(response.status).toBe(200);
    expect(first.requests.filter((r) => r.path === '/v1/embeddings').at(-1)?.body?.input).toEqual(['hello world']);
  });
});
