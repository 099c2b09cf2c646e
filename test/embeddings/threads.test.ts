/**
 * Issue 14: the local model runs on threads of its own. ONNX Runtime's Node binding runs a
 * session synchronously on the calling thread, so on the server's thread a batch of chunks held
 * every request for its whole inference, and a search query waited behind it.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import type { EmbeddingModel } from '../../src/embeddings/embeddings.types.ts';
import { bulkLayout, loadLocalModel } from '../../src/embeddings/local.model.ts';
import { sharedJsonLines } from '../support/fixtures.ts';

const chunks = sharedJsonLines<{ text: string }>('scifact/corpus.jsonl')
  .slice(0, 32)
  .map((doc) => doc.text);

let model: EmbeddingModel;
/** The default batching (texts alone) on two cores: the bulk lane is two threads of one. */
let twoThreads: EmbeddingModel;

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
  twoThreads = await loadLocalModel({
    id: config.embeddingModel,
    modelsDir: config.modelsDir,
    cacheDir: '/tmp/ragport-test-models',
    dtype: config.embeddingDtype,
    threads: 2,
  });
});

const cosine = (a: Float32Array, b: Float32Array) => a.reduce((s, x, i) => s + x * (b[i] as number), 0);

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
    expect(cosine(bulk as Float32Array, interactive as Float32Array)).toBeGreaterThan(0.9999);
  });

  it('the bulk lane splits its cores into model threads, at most four', () => {
    expect([1, 2, 3, 4, 8, 16].map(bulkLayout)).toEqual([
      { threads: 1, intraOp: 1 },
      { threads: 2, intraOp: 1 },
      { threads: 3, intraOp: 1 },
      { threads: 4, intraOp: 1 },
      { threads: 4, intraOp: 2 },
      { threads: 4, intraOp: 4 },
    ]);
  });

  it('a batch spread over the bulk threads comes back in its order, each text as it embeds alone', async () => {
    // Lengths differ so that the threads finish their texts out of order.
    const texts = chunks.slice(0, 12).map((text, i) => (i % 3 === 0 ? text.slice(0, 40) : text));
    const { vectors, promptTokens } = await twoThreads.embed(texts, { priority: 'bulk' });
    const alone = await Promise.all(texts.map((text) => twoThreads.embed([text])));
    expect(vectors).toHaveLength(12);
    vectors.forEach((v, i) => expect(cosine(v, alone[i]?.vectors[0] as Float32Array)).toBeGreaterThan(0.9999));
    expect(promptTokens).toBe(alone.reduce((n, a) => n + a.promptTokens, 0));
  });

  it('a padded batch spread over the bulk threads keeps its order', async () => {
    const { vectors } = await model.embed(chunks, { priority: 'bulk' });
    const alone = await Promise.all(chunks.map((text) => model.embed([text])));
    vectors.forEach((v, i) => {
      const similarities = alone.map((a) => cosine(v, a.vectors[0] as Float32Array));
      expect(similarities.indexOf(Math.max(...similarities))).toBe(i);
    });
  });

  it('counts tokens as the model does', async () => {
    const [count] = await model.countTokens(['Hello world']);
    expect(count).toBe(2);
  });
});

describe('closing the local model', () => {
  it('lets the runs under way return, fails what is queued and what comes after, then ends its threads', async () => {
    const config = loadConfig(process.env);
    const closing = await loadLocalModel({
      id: config.embeddingModel,
      modelsDir: config.modelsDir,
      cacheDir: '/tmp/ragport-test-models',
      dtype: config.embeddingDtype,
      threads: 2,
    });
    const bulk = closing.embed(chunks, { priority: 'bulk' }).then(
      () => 'embedded',
      (error: unknown) => (error as Error).message,
    );
    // Once the first texts are on the threads: closing must not end a thread in the middle of a run
    // (that aborts the process: a worker stopped during ingestion exited with status 134).
    await new Promise((resolve) => setTimeout(resolve, 200));
    await closing.close?.();
    expect(await bulk).toMatch(/was closed/);
    await expect(closing.embed(['after'])).rejects.toThrow(/was closed/);
    await expect(closing.countTokens(['after'])).rejects.toThrow(/was closed/);
  });
});
