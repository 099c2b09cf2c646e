/**
 * Throughput of the ways of running the int8 model (and fp32) on chunk-sized texts, measured in
 * alternating rounds within one process so that load from elsewhere on the machine hits every
 * variant alike: texts/s per variant, median over the rounds.
 *
 *   MODELS_DIR=… node bench/embed/interleaved.ts      (ROUNDS=6, ROUND_SECONDS=2, BATCH=16)
 */
import path from 'node:path';
import { loadConfig } from '../../src/config.ts';
import { loadLocalModel } from '../../src/embeddings/local.model.ts';
import { embeddingVariants } from './variants.ts';
import { sharedJsonLines } from '../../test/support/fixtures.ts';

const rounds = Number(process.env.ROUNDS ?? 6);
const seconds = Number(process.env.ROUND_SECONDS ?? 2);
const batch = Number(process.env.BATCH ?? 16);
const texts = sharedJsonLines<{ title: string; text: string }>('scifact/corpus.jsonl')
  .slice(0, 64)
  .map((d) => `${d.title}. ${d.text}`);

const config = loadConfig(process.env);
const variants = embeddingVariants;
const models = await Promise.all(
  variants.map((v) =>
    loadLocalModel({
      id: config.embeddingModel,
      modelsDir: config.modelsDir,
      cacheDir: path.join(config.dataDir, 'models'),
      dtype: v.dtype,
      batching: v.batching,
      maxBatch: batch,
    }),
  ),
);
const rates: number[][] = variants.map(() => []);
for (let round = 0; round < rounds; round++) {
  for (const [i, model] of models.entries()) {
    let done = 0;
    const start = performance.now();
    while (performance.now() - start < seconds * 1000) {
      const slice = texts.slice(done % texts.length, (done % texts.length) + batch);
      await model.embed(slice, { priority: 'bulk' });
      done += slice.length;
    }
    rates[i]?.push(done / ((performance.now() - start) / 1000));
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
console.log(`chunk-sized texts, batch ${batch}, ${rounds} alternating rounds of ${seconds} s`);
console.log('| variant | texts/s (median) | min | max |\n|---|---:|---:|---:|');
for (const [i, v] of variants.entries()) {
  const r = rates[i] ?? [];
  console.log(`| ${v.name} | ${median(r).toFixed(1)} | ${Math.min(...r).toFixed(1)} | ${Math.max(...r).toFixed(1)} |`);
}
process.exit(0);
