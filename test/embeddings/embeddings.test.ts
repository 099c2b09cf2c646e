import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;
let key: string;
beforeAll(async () => {
  t = await startTestApp();
  key = (await t.createKey({ name: 'emb', scopes: ['embeddings'], tier: 'enterprise' })).key;
});
afterAll(async () => {
  await t.close();
});

interface EmbeddingsBody {
  object: string;
  model: string;
  data: { object: string; index: number; embedding: number[] | string }[];
  usage: { prompt_tokens: number; total_tokens: number };
}

const embed = async (body: unknown) => t.request('/api/v1/embeddings', { method: 'POST', key, json: body });
const cosine = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * (b[i] as number), 0);

describe('POST /api/v1/embeddings (local model)', () => {
  it('a string input: one unit vector of 384 floats, usage, the model actually used in a header', async () => {
    const response = await embed({ model: 'text-embedding-ada-002', input: 'The quick brown fox' });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-ragport-embedding-model')).toBe('sentence-transformers/all-MiniLM-L6-v2');
    const body = (await response.json()) as EmbeddingsBody;
    expect(body).toMatchObject({
      object: 'list',
      model: 'text-embedding-ada-002',
      usage: { prompt_tokens: 4, total_tokens: 4 },
    });
    expect(body.data).toHaveLength(1);
    const vector = body.data[0]?.embedding as number[];
    expect(vector).toHaveLength(384);
    expect(cosine(vector, vector)).toBeCloseTo(1, 4);
  });

  it('an array input keeps input order, and similar texts are closer than unrelated ones', async () => {
    const input = ['A cat sits on the mat.', 'Quarterly revenue grew by 12 percent.', 'A kitten rests on a rug.'];
    const body = (await (
      await embed({ model: 'sentence-transformers/all-MiniLM-L6-v2', input })
    ).json()) as EmbeddingsBody;
    expect(body.data.map((d) => d.index)).toEqual([0, 1, 2]);
    const [cat, revenue, kitten] = body.data.map((d) => d.embedding as number[]) as [number[], number[], number[]];
    expect(cosine(cat, kitten)).toBeGreaterThan(cosine(cat, revenue) + 0.2);
    // The same text alone and inside a batch gets the same vector (batch-independence.test.ts).
    const alone = (await (await embed({ model: 'text-embedding-3-small', input: input[1] })).json()) as EmbeddingsBody;
    expect(cosine(alone.data[0]?.embedding as number[], revenue)).toBeGreaterThanOrEqual(0.9999);
  });

  it('base64 is little-endian float32 of the same vector', async () => {
    const input = 'base64 round trip';
    const floats = (await (await embed({ model: 'text-embedding-ada-002', input })).json()) as EmbeddingsBody;
    const encoded = (await (
      await embed({ model: 'text-embedding-ada-002', input, encoding_format: 'base64' })
    ).json()) as EmbeddingsBody;
    const bytes = Buffer.from(encoded.data[0]?.embedding as string, 'base64');
    const decoded = Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4));
    const expected = floats.data[0]?.embedding as number[];
    expect(decoded).toHaveLength(384);
    decoded.forEach((x, i) => expect(x).toBeCloseTo(expected[i] as number, 6));
  });

  it('usage counts tokens with the model tokenizer, summed over inputs', async () => {
    const body = (await (
      await embed({ model: 'text-embedding-ada-002', input: ['hello world', 'hello'] })
    ).json()) as EmbeddingsBody;
    expect(body.usage).toEqual({ prompt_tokens: 3, total_tokens: 3 });
  });

  it('structured errors for bad input', async () => {
    const cases: [unknown, number, string][] = [
      [{ model: 'text-embedding-ada-002', input: '' }, 400, 'invalid_value'],
      [{ model: 'text-embedding-ada-002', input: [] }, 400, 'invalid_value'],
      [{ model: 'text-embedding-ada-002', input: ['ok', ''] }, 400, 'invalid_value'],
      [{ model: 'text-embedding-ada-002', input: 'x', encoding_format: 'int8' }, 400, 'invalid_value'],
      [{ model: 'text-embedding-ada-002', input: [1.5, 2] }, 400, 'invalid_value'],
      [{ model: 'text-embedding-ada-002', input: [[15339], []] }, 400, 'invalid_value'],
      [{ model: 'text-embedding-ada-002', input: ['text', [15339]] }, 400, 'invalid_value'],
      [{ model: 'text-embedding-ada-002', input: 'x', dimensions: 0 }, 400, 'invalid_value'],
      [{ input: 'x' }, 400, 'missing_field'],
      [{ model: 'text-embedding-ada-002', input: Array.from({ length: 2049 }, () => 'x') }, 400, 'invalid_value'],
      [{ model: 'nonexistent-model', input: 'x' }, 404, 'model_not_found'],
    ];
    for (const [body, status, code] of cases) {
      const response = await embed(body);
      expect(response.status, JSON.stringify(body).slice(0, 80)).toBe(status);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe(code);
    }
  });

  it('an input that fails only by its length or an empty string says so, not the generic shape', async () => {
    const model = 'text-embedding-ada-002';
    const cases: [unknown, string][] = [
      [Array.from({ length: 2049 }, () => 'x'), 'input: at most 2048 inputs per request (got 2049)'],
      [Array.from({ length: 2049 }, () => [15339]), 'input: at most 2048 inputs per request (got 2049)'],
      [[], 'input: must not be empty'],
      ['', 'input: must not be empty'],
      [['ok', ''], 'input.1: must not be empty'],
      [
        { text: 'x' },
        'input: input is a string, an array of strings, or token ids (an array of integers, or an array of such arrays)',
      ],
    ];
    for (const [input, message] of cases) {
      const response = await embed({ model, input });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: { message: string } }).error.message).toBe(message);
    }
  });

  it('token ids (cl100k_base, as LangChain sends them) are the text they encode', async () => {
    const texts = ['hello world', 'Vectors of the same text match whatever shares the batch.'];
    const { encode } = await import('gpt-tokenizer/encoding/cl100k_base');
    const byText = (await (await embed({ model: 'text-embedding-ada-002', input: texts })).json()) as EmbeddingsBody;
    const response = await embed({ model: 'text-embedding-ada-002', input: texts.map((text) => encode(text)) });
    expect(response.status).toBe(200);
    const byIds = (await response.json()) as EmbeddingsBody;
    expect(byIds.data).toHaveLength(2);
    for (const i of [0, 1]) {
      expect(cosine(byIds.data[i]?.embedding as number[], byText.data[i]?.embedding as number[])).toBeGreaterThan(
        0.9999,
      );
    }
    // One array of ids is one input.
    const single = (await (
      await embed({ model: 'text-embedding-ada-002', input: [15339, 1917] })
    ).json()) as EmbeddingsBody;
    expect(single.data).toHaveLength(1);
    expect(cosine(single.data[0]?.embedding as number[], byText.data[0]?.embedding as number[])).toBeGreaterThan(
      0.9999,
    );

    // OpenAI's limits: 8,192 ids in one input, 300,000 in all.
    const tooLong = await embed({
      model: 'text-embedding-ada-002',
      input: [Array.from({ length: 8_193 }, () => 15339)],
    });
    expect(tooLong.status).toBe(400);
    expect(((await tooLong.json()) as { error: { message: string } }).error.message).toContain(
      'at most 8192 token ids',
    );
    const tooMany = await embed({
      model: 'text-embedding-ada-002',
      input: Array.from({ length: 37 }, () => Array.from({ length: 8_192 }, () => 15339)),
    });
    expect(tooMany.status).toBe(400);
    expect(((await tooMany.json()) as { error: { message: string } }).error.message).toBe(
      'input is too large: at most 300000 token ids in total',
    );

    const unknown = await embed({ model: 'text-embedding-ada-002', input: [[15339], [15339, 999_999]] });
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as { error: { message: string; param: string } }).error).toMatchObject({
      param: 'input',
      message: expect.stringContaining('input[1]: token 999999 is not a cl100k_base token id'),
    });
  });

  it("dimensions: the model's own length is accepted; a local model cannot shorten its vectors", async () => {
    const same = await embed({ model: 'text-embedding-ada-002', input: 'x', dimensions: 384 });
    expect(same.status).toBe(200);
    expect(((await same.json()) as EmbeddingsBody).data[0]?.embedding).toHaveLength(384);
    const shorter = await embed({ model: 'text-embedding-ada-002', input: 'x', dimensions: 128 });
    expect(shorter.status).toBe(400);
    expect(((await shorter.json()) as { error: { message: string; param: string } }).error).toEqual(
      expect.objectContaining({
        param: 'dimensions',
        message:
          "Model 'text-embedding-ada-002' makes 384-dimensional vectors and cannot shorten them: leave out dimensions, or pass 384",
      }),
    );
  });

  it('works through the official openai client', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: `${t.url}/api/v1` });
    const result = await client.embeddings.create({ model: 'text-embedding-3-small', input: ['one', 'two'] });
    expect(result.data).toHaveLength(2);
    expect(result.data[1]?.index).toBe(1);
    expect(result.data[0]?.embedding).toHaveLength(384);
    await expect(client.embeddings.create({ model: 'nope', input: 'x' })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    // Token ids through the client, as OpenAI's API takes them.
    const ids = await client.embeddings.create({ model: 'text-embedding-3-small', input: [[15339, 1917]] });
    expect(ids.data[0]?.embedding).toHaveLength(384);
    await expect(
      client.embeddings.create({ model: 'text-embedding-3-small', input: 'x', dimensions: 256 }),
    ).rejects.toBeInstanceOf(OpenAI.BadRequestError);
  });
});
