/**
 * Online backup of the embedded database (`GET /api/v1/backup`) under use: a real ragport server
 * (`node src/server.ts`, a process of its own, embedded PGlite) holding BENCH_DOCS (2000) SciFact
 * abstracts; BENCH_ROUNDS (3) backups downloaded one after another while a second client sends
 * `/healthz` every 20 ms and `rag_search` back to back; the same probes on the idle server first.
 * Prints the database's size, the archive's, how long statements were held, how long a download
 * took, and the probes' latencies idle and during.
 *
 *   MODELS_DIR=… node bench/operations/backup.ts
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { sharedJsonLines } from '../../test/support/fixtures.ts';
import { freePort } from '../../test/support/processes.ts';
import { api, percentile, pool, saveResults, spawnServer } from '../support.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DOCS = Number(process.env.BENCH_DOCS ?? 2_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PROBE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 10);
const adminKey = `bench_admin_${'x'.repeat(32)}`;
const metricsToken = 'bench-metrics-token-0123456789';
const corpus = sharedJsonLines<{ _id: string; title: string; text: string }>('scifact/corpus.jsonl').slice(0, DOCS);
const queries = sharedJsonLines<{ text: string }>('scifact/queries.jsonl').map((q) => q.text);
const round1 = (x: number) => Math.round(x * 10) / 10;
const summary = (values: number[]) => ({
  n: values.length,
  p50: round1(percentile(values, 50)),
  p99: round1(percentile(values, 99)),
  max: round1(Math.max(...values)),
});

const server = { url: '', key: adminKey };
async function must<T>(method: string, route: string, body?: unknown): Promise<T> {
  const answer = await api<T>(server, method, route, body);
  if (answer.status >= 300) throw new Error(`${method} ${route}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body;
}

/** The server's event-loop delay since the last scrape (each scrape resets it), ms. */
async function eventLoopLag(): Promise<{ p99: number; max: number }> {
  const text = await (
    await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } })
  ).text();
  const value = (name: string) => round1(Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN) * 1000);
  return { p99: value('nodejs_eventloop_lag_p99_seconds'), max: value('nodejs_eventloop_lag_max_seconds') };
}

/** `/healthz` every 20 ms and searches back to back until `until` settles. */
async function probe(until: Promise<unknown>) {
  let done = false;
  void until.finally(() => (done = true));
  const healthz: number[] = [];
  const search: number[] = [];
  const health = (async () => {
    while (!done) {
      const started = performance.now();
      await (await fetch(`${server.url}/healthz`)).arrayBuffer();
      healthz.push(performance.now() - started);
      await sleep(20);
    }
  })();
  let q = 0;
  while (!done) {
    const started = performance.now();
    await must('POST', '/api/v1/agent/tool-calling', {
      tool_name: 'rag_search',
      parameters: { collection: 'bench', query: queries[q++ % queries.length], top_k: 10 },
    });
    search.push(performance.now() - started);
  }
  await health;
  return { healthz: summary(healthz), rag_search: summary(search), event_loop: await eventLoopLag() };
}

const dataDir = mkdtempSync(path.join(tmpdir(), 'ragport-backup-bench-'));
let child: ChildProcess | undefined;
try {
  const port = await freePort();
  server.url = `http://127.0.0.1:${port}`;
  child = spawnServer(root, port, adminKey, { DATA_DIR: dataDir, METRICS_TOKEN: metricsToken });
  for (let i = 0; ; i++) {
    if (
      await fetch(`${server.url}/readyz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (i > 600) throw new Error('server not ready after 120 s');
    await sleep(200);
  }
  await must('POST', '/api/v1/rag/collections', { name: 'bench' });
  await pool(corpus, 8, (doc) =>
    must('POST', '/api/v1/rag/collections/bench/documents', {
      name: `${doc._id}.txt`,
      content: doc.text,
      metadata: { title: doc.title },
    }),
  );
  let chunks = 0;
  for (;;) {
    const c = await must<{ document_count: number; chunk_count: number }>('GET', '/api/v1/rag/collections/bench');
    chunks = c.chunk_count;
    if (c.document_count >= corpus.length) break;
    await sleep(1_000);
  }
  const databaseMb = Number(execFileSync('du', ['-sm', path.join(dataDir, 'pg')], { encoding: 'utf8' }).split('\t')[0]);

  await eventLoopLag();
  const idle = await probe(sleep(PROBE_SECONDS * 1_000));
  const backups: { held_ms: number; seconds: number; archive_mb: number }[] = [];
  const during = await probe(
    (async () => {
      for (let r = 0; r < ROUNDS; r++) {
        const started = performance.now();
        const response = await fetch(`${server.url}/api/v1/backup`, {
          headers: { authorization: `Bearer ${adminKey}` },
        });
        if (response.status !== 200) throw new Error(`backup: ${response.status} ${await response.text()}`);
        const bytes = (await response.arrayBuffer()).byteLength;
        backups.push({
          held_ms: Number(response.headers.get('x-ragport-backup-held-ms')),
          seconds: round1((performance.now() - started) / 1_000),
          archive_mb: round1(bytes / 2 ** 20),
        });
        await sleep(500);
      }
    })(),
  );

  const file = saveResults('backup', { documents: corpus.length, chunks, databaseMb, idle, during, backups });
  console.log(
    `\nOnline backup of the embedded database, ${cpus().length} cores: ${corpus.length} documents, ${chunks} chunks, ` +
      `database ${databaseMb} MB on disk. Raw: ${path.relative(root, file)}\n`,
  );
  console.log('| backup | statements held ms | download s | archive MB |');
  console.log('|---|---|---|---|');
  backups.forEach((b, i) => console.log(`| ${i + 1} | ${b.held_ms} | ${b.seconds} | ${b.archive_mb} |`));
  console.log('\n| probe | idle p50 / p99 / max ms | during backups p50 / p99 / max ms |');
  console.log('|---|---|---|');
  for (const name of ['healthz', 'rag_search'] as const)
    console.log(
      `| ${name} | ${idle[name].p50} / ${idle[name].p99} / ${idle[name].max} | ${during[name].p50} / ${during[name].p99} / ${during[name].max} |`,
    );
  console.log(
    `| server's event-loop delay (p99 / max) | ${idle.event_loop.p99} / ${idle.event_loop.max} | ${during.event_loop.p99} / ${during.event_loop.max} |`,
  );
} finally {
  if (child && child.exitCode === null) {
    const exited = new Promise((resolve) => child?.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
  rmSync(dataDir, { recursive: true, force: true });
}
