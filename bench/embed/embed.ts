/**
 * Local embedding throughput: chunks/s and tokens/s for short (≈30 tokens) and chunk-sized
 * (≈300 tokens, truncated to the model's 256) inputs at batch sizes 1–64, peak RSS, and the same
 * texts through Python sentence-transformers (PyTorch CPU) in the same run, with the ratio.
 *
 *   MODELS_DIR=… node bench/embed/embed.ts        (python from bench/embed/setup-python.sh,
 *                                                   or RAGPORT_BENCH_PYTHON)
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadConfig } from '../../src/config.ts';
import { loadLocalModel } from '../../src/embeddings/local.model.ts';
import { saveResults } from '../support.ts';

const corpus = readFileSync(new URL('../../../shared/data/scifact/corpus.jsonl', import.meta.url), 'utf8')
  .split('\n')
  .filter(Boolean)
  .slice(0, 400)
  .map((l) => JSON.parse(l) as { title: string; text: string });
const short = corpus.slice(0, 128).map((d) => d.title);
const long = corpus.slice(0, 128).map((d) => `${d.title}. ${d.text}`);
const batches = [1, 8, 16, 32, 64];
const seconds = Number(process.env.BENCH_SECONDS ?? 4);

const config = loadConfig(process.env);
const rows: { impl: string; kind: string; batch: number; chunks_per_s: number; tokens_per_s: number }[] = [];
for (const dtype of ['q8', 'fp32'] as const) {
  const model = await loadLocalModel({
    id: config.embeddingModel,
    modelsDir: config.modelsDir,
    cacheDir: '/tmp/ragport-models',
    dtype,
    maxBatch: 64,
  });
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
        impl: `ragport ${dtype}`,
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
console.log(
  'kind   batch   ragport q8 chunks/s (tok/s)   ragport fp32 chunks/s   sentence-transformers chunks/s   q8/ST   fp32/ST',
);
for (const kind of ['short', 'long']) {
  for (const batch of batches) {
    const get = (impl: string) => rows.find((r) => r.impl === impl && r.kind === kind && r.batch === batch);
    const q8 = get('ragport q8');
    const fp32 = get('ragport fp32');
    const ref = get('sentence-transformers');
    console.log(
      `${kind.padEnd(6)} ${String(batch).padStart(5)}   ${q8?.chunks_per_s.toFixed(1).padStart(8)} (${q8?.tokens_per_s.toFixed(0).padStart(6)})        ${fp32?.chunks_per_s.toFixed(1).padStart(8)}                ${ref?.chunks_per_s.toFixed(1).padStart(8)}               ${((q8?.chunks_per_s ?? 0) / (ref?.chunks_per_s ?? 1)).toFixed(2).padStart(5)}   ${((fp32?.chunks_per_s ?? 0) / (ref?.chunks_per_s ?? 1)).toFixed(2).padStart(5)}`,
    );
  }
}
console.log(
  `peak RSS: ragport (both dtypes loaded) ${nodeRss.toFixed(0)} MB, sentence-transformers ${st.peak_rss_mb.toFixed(0)} MB`,
);
console.log(
  'saved',
  saveResults('embed', { rows, peak_rss_mb: { ragport: nodeRss, sentence_transformers: st.peak_rss_mb } }),
);
process.exit(0);
