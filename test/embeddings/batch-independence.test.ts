/**
 * The same text gets the same vector whatever shares its batch: alone, beside shorter or longer
 * texts, through /embeddings, through ingestion, and as a query among concurrent queries.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';

let t: TestApp;
let client: OpenAI;

const SAME = 0.9999;
const cosine = (a: readonly number[], b: readonly number[]) => a.reduce((s, x, i) => s + x * (b[i] as number), 0);

const text = 'Quarterly revenue grew by 12 percent.';
const short = 'Hi.';
const long =
  'The harbour authority publishes tide tables for every port along the coast, and pilots use them to guide large ' +
  'ships past the sandbanks; in fog the lighthouse keepers sound the signals and log every vessel that passes, ' +
  'the weather, and the oil burned through the night. '.repeat(3);

beforeAll(async () => {
  t = await startTestApp({ config: { chunking: { maxTokens: 48, overlapTokens: 0 } } });
  const { key } = await t.createKey({ name: 'emb', scopes: ['embeddings', 'tools', 'read', 'write'] });
  client = new OpenAI({ apiKey: key, baseURL: `${t.url}/api/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await t.close();
});

const embed = async (input: string[]) => {
  const response = await client.embeddings.create({ model: 'text-embedding-ada-002', input, encoding_format: 'float' });
  return response.data.map((d) => d.embedding);
};

describe('batch independence', () => {
  it('/embeddings: a text alone, beside a shorter text, beside a longer one, among many', async () => {
    const [alone] = (await embed([text])) as [number[]];
    const batches = [
      [text, short],
      [long, text],
      [short, long, text, 'Another sentence of middling length about something else entirely.'],
    ];
    for (const batch of batches) {
      const vectors = await embed(batch);
      const vector = vectors[batch.indexOf(text)] as number[];
      expect(cosine(alone, vector), `beside ${batch.length - 1} others`).toBeGreaterThanOrEqual(SAME);
    }
    // Concurrent requests are coalesced into one model batch by the batcher: still the same.
    const concurrent = await Promise.all([embed([long]), embed([text]), embed([short, long])]);
    expect(cosine(alone, concurrent[1][0] as number[])).toBeGreaterThanOrEqual(SAME);
  });

  it('ingestion and search: a chunk embedded among its document’s other chunks matches the text embedded alone', async () => {
    await createCollection(t, 'batch');
    // Paragraphs of very different lengths, no title line: each chunk is embedded as its own text.
    const paragraphs = [
      long,
      text,
      'Sourdough rises slowly.',
      'Fog signals sounded when the beam of the lighthouse could not be seen from the ships at anchor in the bay.',
    ];
    const r = await t.request('/api/v1/rag/collections/batch/documents', {
      method: 'POST',
      json: { name: 'mixed.txt', content: paragraphs.join('\n') },
    });
    const { id } = (await r.json()) as { id: string };
    expect((await waitForDocument(t, id)).status).toBe('processed');

    const search = async (query: string) => {
      const response = await t.request('/api/v1/agent/tool-calling', {
        method: 'POST',
        json: {
          tool_name: 'rag_search',
          parameters: { query, collection: 'batch', mode: 'dense', similarity_threshold: -1, top_k: 20 },
        },
      });
      expect(response.status).toBe(200);
      return ((await response.json()) as { results: { content: string; scores: { dense: number } }[] }).results;
    };
    const chunks = (await search('lighthouse')).map((h) => h.content);
    expect(chunks.length).toBeGreaterThanOrEqual(3);
    expect(new Set(chunks.map((c) => c.length)).size).toBeGreaterThan(2);
    // Every chunk searched for by its own text, all at once (the queries share model batches):
    // the stored vector (embedded with its companions) and the query vector are the same.
    const results = await Promise.all(chunks.map((c) => search(c)));
    for (const [i, chunk] of chunks.entries()) {
      const top = results[i]?.[0];
      expect(top?.content).toBe(chunk);
      expect(top?.scores.dense, chunk.slice(0, 40)).toBeGreaterThanOrEqual(SAME);
    }
    // And /embeddings of the text alone gives that vector too.
    const [alone] = (await embed([text])) as [number[]];
    const [again] = (await embed([long, text, short])).slice(1, 2) as [number[]];
    expect(cosine(alone, again)).toBeGreaterThanOrEqual(SAME);
  });
});
