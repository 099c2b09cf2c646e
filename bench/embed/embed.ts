/**
 * Local embedding throughput: chunks/s and tokens/s for short (≈30 tokens) and chunk-sized
 * (≈300 tokens, truncated to the model's 256) inputs at batch sizes 1–64, for each way of running
 * the model (q8 padded batches, q8 one text per run, fp32 padded batches), how far each one's
 * vectors move with their batch companions, peak RSS, and the same texts through Python
 * sentence-transformers (PyTorch CPU) in the same run.
 *
 *   MODELS_DIR=… node bench/embed/embed.ts        (python from bench/embed/setup-python.sh,
 *                                                   or RAGPORT_BENCH_PYTHON)
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { loadConfig } from '../../src/config.ts';
import { loadLocalModel } from '../../src/embeddings/local.model.ts';
import { embeddingVariants } from './variants.ts';
import { saveResults } from '../support.ts';
import { sharedJsonLines } from '../../test/support/fixtures.ts';

const corpus = sharedJsonLines<{ title: string; text: string }>('scifact/corpus.jsonl').slice(0, 400);
const short = corpus.slice(0, 128).map((d) => d.title);
const long = corpus.slice(0, 128).map((d) => `${d.title}. ${d.text}`);
const batches = [1, 8, 16, 32, 64];
const seconds = Number(process.env.BENCH_SECONDS ?? 4);

const config = loadConfig(process.env);
const variants = embeddingVariants;
const rows: { impl: string; kind: string; batch: number; chunks_per_s: number; tokens_per_s: number }[] = [];
const dot = (a: Float32Array, b: Float32Array) => a.reduce((s, x, i) => s + x * (b[i] as number), 0);
/** Lowest cosine between a text embedded by itself and the same text inside a batch of 32. */
const independence: Record<string, number> = {};
for (const variant of variants) {
  const model = await loadLocalModel({
    id: config.embeddingModel,
    modelsDir: config.modelsDir,
    cacheDir: path.join(config.dataDir, 'models'),
    dtype: variant.dtype,
    batching: variant.batching,
    maxBatch: 64,
  });
  const mixed = [...short.slice(0, 16), ...long.slice(16, 32)];
  const { vectors: together } = await model.embed(mixed, { priority: 'bulk' });
  let lowest = 1;
  for (const [i, text] of mixed.entries()) {
    const { vectors: alone } = await model.embed([text], { priority: 'bulk' });
    lowest = Math.min(lowest, dot(alone[0] as Float32Array, together[i] as Float32Array));
  }
  independence[variant.name] = lowest;
  for (const [kind, texts] of [
    ['short', short],
    ['long', long],
  ] as const) {
    const tokens = (await model.countTokens(texts)).reduce((a, n) => a + Math.min(n, model.maxTokens - 2), 0);
    for (const batch of batches) {
      await model.embed(texts.slice(0, batch), { priority: 'bulk' });
      let rounds = 0;
      const start = performance.now();
      while (performance.now() - start < seconds * 1000) {
        for (let i = 0; i < texts.length; i += batch)
          await model.embed(texts.slice(i, i + batch), { priority: 'bulk' });
        rounds++;
      }
      const elapsed = (performance.now() - start) / 1000;
      rows.push({
        impl: `ragport ${variant.name}`,
        kind,
        batch,
        chunks_per_s: (rounds * texts.length) / elapsed,
        tokens_per_s: (rounds * tokens) / elapsed,
      });
    }
  }
}
const nodeRss = process.resourceUsage().maxRSS / 1024;

const python =
  process.env.RAGPORT_BENCH_PYTHON ??
  execFileSync('bash', [new URL('./setup-python.sh', import.meta.url).pathname], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .pop();
const st = JSON.parse(
  execFileSync(python as string, [new URL('./st_bench.py', import.meta.url).pathname], {
    input: JSON.stringify({ short, long, batches, seconds }),
    encoding: 'utf8',
    maxBuffer: 1 << 24,
  }),
) as { rows: { kind: string; batch: number; chunks_per_s: number; tokens_per_s: number }[]; peak_rss_mb: number };
for (const r of st.rows) rows.push({ impl: 'sentence-transformers', ...r });

console.log(`\nEmbedding throughput, ${config.embeddingModel}, ${process.env.EMBEDDING_THREADS ?? 'all'} threads`);
const impls = [...variants.map((v) => `ragport ${v.name}`), 'sentence-transformers'];
console.log(`| kind | batch | ${impls.map((i) => `${i} texts/s (tok/s)`).join(' | ')} |`);
console.log(`|---|---:|${impls.map(() => '---:').join('|')}|`);
for (const kind of ['short', 'long']) {
  for (const batch of batches) {
    const cells = impls.map((impl) => {
      const r = rows.find((x) => x.impl === impl && x.kind === kind && x.batch === batch);
      return r ? `${r.chunks_per_s.toFixed(1)} (${r.tokens_per_s.toFixed(0)})` : '-';
    });
    console.log(`| ${kind} | ${batch} | ${cells.join(' | ')} |`);
  }
}
console.log('\nmin cosine, a text alone vs inside a batch of 32 mixed-length texts:');
for (const [name, value] of Object.entries(independence)) console.log(`  ${name.padEnd(12)} ${value.toFixed(6)}`);
console.log(
  `peak RSS: ragport (all variants loaded) ${nodeRss.toFixed(0)} MB, sentence-transformers ${st.peak_rss_mb.toFixed(0)} MB`,
);
console.log(
  'saved',
  saveResults('embed', {
    rows,
    independence,
    peak_rss_mb: { ragport: nodeRss, sentence_transformers: st.peak_rss_mb },
  }),
);
process.exit(0);
