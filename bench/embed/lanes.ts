/**
 * The bulk lane's layout (how ingestion's embedding uses the cores): chunk-sized SciFact texts
 * embedded through the bulk lane by one model thread with every core as ONNX Runtime threads, by
 * one model thread per core, and by a single thread, first on an idle machine, then while other
 * processes take part of the cores the way the embedded database's thread, the event loop and
 * searches do during ingestion (each busy BENCH_DUTY of the time in 5 ms bursts; one per core
 * minus one, at the default niceness, while the bulk lane runs at its own lower priority).
 *
 *   MODELS_DIR=… node bench/embed/lanes.ts
 *
 * BENCH_TEXTS (240) texts per measurement, BENCH_ROUNDS (2) rounds of all layouts, alternating.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config.ts';
import type { EmbeddingModel } from '../../src/embeddings/embeddings.types.ts';
import { bulkLayout, loadLocalModel } from '../../src/embeddings/local.model.ts';
import { withTitle } from '../../src/ingestion/title.ts';
import { sharedJsonLines } from '../../test/support/fixtures.ts';
import { saveResults } from '../support.ts';

const COUNT = Number(process.env.BENCH_TEXTS ?? 240);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const DUTY = Number(process.env.BENCH_DUTY ?? 0.45);
const cores = availableParallelism();
const texts = sharedJsonLines<{ title: string; text: string }>('scifact/corpus.jsonl')
  .slice(0, COUNT)
  .map((d) => withTitle(d.title, d.text));

const chosen = bulkLayout(cores);
const layouts = [
  { name: `1 thread × ${cores} (before)`, bulk: { threads: 1, intraOp: cores } },
  { name: `default: ${chosen.threads} threads × ${chosen.intraOp}`, bulk: chosen },
  { name: '1 thread × 1', bulk: { threads: 1, intraOp: 1 } },
];

/** Processes each busy `DUTY` of the time, like the threads that share the cores with ingestion. */
function startLoad(): ChildProcess[] {
  const busyMs = 5;
  const idleMs = Math.round((busyMs * (1 - DUTY)) / DUTY);
  const program = `for (;;) { const t = performance.now(); while (performance.now() - t < ${busyMs}); await new Promise((r) => setTimeout(r, ${idleMs})); }`;
  return Array.from({ length: Math.max(1, cores - 1) * 2 }, () =>
    spawn(process.execPath, ['--input-type=module', '-e', program], { stdio: 'ignore' }),
  );
}

const config = loadConfig(process.env);
const models = new Map<string, EmbeddingModel>();
for (const layout of layouts) {
  const model = await loadLocalModel({
    id: config.embeddingModel,
    modelsDir: config.modelsDir,
    cacheDir: path.join(tmpdir(), 'ragport-bench-models'),
    dtype: config.embeddingDtype,
    threads: cores,
    bulk: layout.bulk,
  });
  await model.embed(texts.slice(0, 8), { priority: 'bulk' }); // starts the bulk lane
  models.set(layout.name, model);
}
const results: { layout: string; load: 'idle' | 'shared'; round: number; texts_per_s: number }[] = [];
for (let round = 1; round <= ROUNDS; round++) {
  for (const load of ['idle', 'shared'] as const) {
    for (const layout of layouts) {
      const model = models.get(layout.name) as EmbeddingModel;
      const others = load === 'shared' ? startLoad() : [];
      await new Promise((resolve) => setTimeout(resolve, 300));
      // As ingestion sends them: a few documents' chunks at a time.
      const started = performance.now();
      for (let at = 0; at < texts.length; at += 8) await model.embed(texts.slice(at, at + 8), { priority: 'bulk' });
      const seconds = (performance.now() - started) / 1000;
      for (const child of others) child.kill();
      results.push({ layout: layout.name, load, round, texts_per_s: Math.round((texts.length / seconds) * 10) / 10 });
    }
  }
}

console.log(
  `\nBulk lane layouts, ${config.embeddingModel} (${config.embeddingDtype}), ${COUNT} chunk-sized texts, ${cores} cores; ` +
    `"shared": ${Math.max(1, cores - 1) * 2} processes each busy ${Math.round(DUTY * 100)} % of the time. Texts/s per round.`,
);
console.log('| layout | idle | shared |');
console.log('|---|---|---|');
for (const layout of layouts) {
  const cell = (load: string) =>
    results
      .filter((r) => r.layout === layout.name && r.load === load)
      .map((r) => r.texts_per_s)
      .join(' / ');
  console.log(`| ${layout.name} | ${cell('idle')} | ${cell('shared')} |`);
}
console.log('saved', saveResults('embed-lanes', { cores, duty: DUTY, texts: COUNT, results }));
process.exit(0);
