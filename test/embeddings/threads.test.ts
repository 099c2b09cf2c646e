/**
 * Issue 14: the local model runs on threads of its own. ONNX Runtime's Node binding runs a
 * session synchronously on the calling thread, so on the server's thread a batch of chunks held
 * every request for its whole inference, and a search query waited behind it.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import type { EmbeddingModel } from '../../src/embeddings/embeddings.types.ts';
import { loadLocalModel } from '../../src/embeddings/local.model.ts';
import { sharedJsonLines } from '../support/fixtures.ts';

const chunks = sharedJsonLines<{ text: string }>('scifact/corpus.jsonl')
  .slice(0, 32)
  .map((doc) => doc.text);

let model: EmbeddingModel;

beforeAll(async () => {
  const config = loadConfig(process.env);
  // One padded run over 32 chunk-sized texts: a single long inference, the worst case for the
  // thread that runs it.
  model = await loadLocalModel({
    id: config.embeddingModel,
    modelsDir: config.modelsDir,
    cacheDir: '/tmp/ragport-test-models',
    dtype: config.embeddingDtype,
    batching: 'padded',
  });
  await model.embed(['warm'], { priority: 'bulk' }); // the bulk lane starts on first use
});

describe('the local model on threads of its own', () => {
  it('a bulk batch leaves the event loop free, and a query is answered before the batch ends', async () => {
    const ticks = [performance.now()];
    const ticker = setInterval(() => ticks.push(performance.now()), 10);
    let queryDone = 0;
    const bulk = model.embed(chunks, { priority: 'bulk' }).then((result) => ({ result, at: performance.now() }));
    await new Promise((resolve) => setTimeout(resolve, 30));
    const query = await model.embed(['what lowers blood pressure?'], { asQuery: true });
    queryDone = performance.now();
    const { result, at: bulkDone } = await bulk;
    clearInterval(ticker);
    ticks.push(performance.now());

    expect(result.vectors).toHaveLength(32);
    expect(query.vectors[0]).toHaveLength(model.dimensions);
    const took = (ticks.at(-1) as number) - (ticks[0] as number);
    const longestStall = Math.max(...ticks.slice(1).map((t, i) => t - (ticks[i] as number)));
    // Before: one stall as long as the batch (no timer ran), and the query answered after it.
    // (A bound relative to the batch's time: on a loaded machine any thread waits for a core.)
    expect(took).toBeGreaterThan(200);
    expect(longestStall).toBeLessThan(took / 3);
    expect(queryDone).toBeLessThan(bulkDone);
  });

  it('gives the same vector for a text on either lane', async () => {
    const [bulk] = (await model.embed([chunks[0] as string], { priority: 'bulk' })).vectors;
    const [interactive] = (await model.embed([chunks[0] as string])).vectors;
    const cosine = (bulk as Float32Array).reduce((s, x, i) => s + x * ((interactive as Float32Array)[i] as number), 0);
    expect(cosine).toBeGreaterThan(0.9999);
  });

  it('counts tokens as the model does', async () => {
    const [count] = await model.countTokens(['Hello world']);
    expect(count).toBe(2);
  });
});
