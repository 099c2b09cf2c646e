/**
 * rag_search latency on an existing data directory (e.g. one kept by responsiveness.ts with
 * BENCH_KEEP_DATA=1), per mode, searches back to back through a real server process.
 *
 *   MODELS_DIR=… node bench/ingestion/search-latency.ts <DATA_DIR> [server root]
 * BENCH_QUERIES (200) per mode after 20 not measured; BENCH_SETTLE_SECONDS (10) idle after start;
 * BENCH_COLLECTION (bench) the collection searched.
 */
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { sharedJsonLines } from '../../test/support/fixtures.ts';
import { spawnServer } from '../support.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const [dataDir, serverRoot = root] = process.argv.slice(2);
if (!dataDir) throw new Error('usage: search-latency.ts <DATA_DIR> [server root]');
const adminKey = `bench_admin_${'x'.repeat(32)}`;
const port = 18_000 + (process.pid % 1000);
const child = spawnServer(serverRoot, port, adminKey, { DATA_DIR: dataDir, INGESTION_CONCURRENCY: '0' });
const url = `http://127.0.0.1:${port}`;
for (;;) {
  if (
    (await fetch(`${url}/readyz`).then(
      (r) => r.status,
      () => 0,
    )) === 200
  )
    break;
  await sleep(250);
}
// Start-up work first (the embedded database's first maintenance pass runs 5 s after start).
await sleep(Number(process.env.BENCH_SETTLE_SECONDS ?? 10) * 1_000);
const queries = sharedJsonLines<{ text: string }>('scifact/queries.jsonl').map((q) => q.text);
const n = Number(process.env.BENCH_QUERIES ?? 200);
const pct = (v: number[], p: number) =>
  [...v].sort((a, b) => a - b)[Math.min(v.length - 1, Math.ceil((p / 100) * v.length) - 1)] as number;
for (const mode of ['dense', 'keyword', 'hybrid']) {
  const times: number[] = [];
  for (let i = 0; i < n + 20; i++) {
    const started = performance.now();
    const r = await fetch(`${url}/api/v1/agent/tool-calling`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        tool_name: 'rag_search',
        parameters: {
          collection: process.env.BENCH_COLLECTION ?? 'bench',
          query: queries[i % queries.length],
          top_k: 10,
          mode,
        },
      }),
    });
    await r.text();
    if (r.status !== 200) throw new Error(`${r.status}`);
    if (i >= 20) times.push(performance.now() - started);
  }
  console.log(
    `${path.basename(serverRoot)} ${mode}: p50 ${pct(times, 50).toFixed(1)} ms, p99 ${pct(times, 99).toFixed(1)} ms`,
  );
}
child.kill('SIGTERM');
