import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';

/** Clients that leave a field unset by sending null (as many OpenAI-compatible clients do) get its default. */

let t: TestApp;
let key: string;
beforeAll(async () => {
  t = await startTestApp();
  key = (await t.createKey({ name: 'emb-null', scopes: ['embeddings'], tier: 'enterprise' })).key;
});
afterAll(async () => {
  await t.close();
});

const embed = async (body: unknown) => t.request('/api/v1/embeddings', { method: 'POST', key, json: body });

describe('POST /api/v1/embeddings with null options', () => {
  it('encoding_format, dimensions and user as null: floats of the model, as when they are left out', async () => {
    const input = 'null means the default';
    const plain = (await (await embed({ model: 'text-embedding-ada-002', input })).json()) as {
      data: { embedding: number[] }[];
    };
    const response = await embed({
      model: 'text-embedding-ada-002',
      input,
      encoding_format: null,
      dimensions: null,
      user: null,
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { data: { embedding: number[] }[] };
    expect(body.data[0]?.embedding).toHaveLength(384);
    expect(body.data[0]?.embedding).toEqual(plain.data[0]?.embedding);
  });

  it('the official SDK, given null for dimensions, gets the vectors', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: `${t.url}/api/v1`, maxRetries: 0 });
    const result = await client.embeddings.create({
      model: 'text-embedding-ada-002',
      input: ['a', 'b'],
      dimensions: null as unknown as undefined,
      user: null as unknown as undefined,
    });
    expect(result.data.map((d) => [d.index, d.embedding.length])).toEqual([
      [0, 384],
      [1, 384],
    ]);
  });

  it('a wrong value is still a 400', async () => {
    const response = await embed({ model: 'text-embedding-ada-002', input: 'x', encoding_format: 'int8' });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { param: 'encoding_format', code: 'invalid_value' } });
  });
});
