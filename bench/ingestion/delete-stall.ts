/**
 * What deleting a large collection costs everyone else: a real ragport server (`node
 * src/server.ts`, a process of its own) holds a large collection `bench` and a small one `probe`;
 * a client sends a `/healthz` and a `rag_search` on `probe` one after another, idle for a few
 * seconds, then while `bench` is deleted, until its rows are gone (the server's "deleted
 * collection purged" log line; a server without it removed them before answering the DELETE),
 * and for BENCH_TAIL_SECONDS (35) after, while the dead rows are vacuumed; then it sends nothing
 * for up to 30 s, for the embedded database's deferred index cleanups to run. Printed: the DELETE's own latency, the probes' latencies idle and during,
 * and how long the rows took to go.
 *
 *   MODELS_DIR=… node bench/ingestion/delete-stall.ts [DATA_DIR] [server root]
 *
 * DATA_DIR: an embedded data directory holding a collection `bench` (kept by this bench with
 * BENCH_KEEP_DATA=1, or by responsiveness.ts), copied afresh for the run.
 * With BENCH_ONE_DOCUMENT=1, `bench` is (or is ingested as) one markdown document of the abstracts,
 * and that document is deleted instead of the collection (with BENCH_REPLACE=1 replaced by as many
 * other abstracts, until processed and its old version removed). Without DATA_DIR, BENCH_DOCS
 * (2000) SciFact abstracts are ingested into `bench` first (with BENCH_KEEP_DATA=1 only that, into
 * a new embedded data directory that is kept, for runs given it) — on the PostgreSQL server of
 * BENCH_DATABASE_URL when set (a database of its own, dropped after), else on a new embedded one.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { sharedJsonLines } from '../../test/support/fixtures.ts';
import { api, percentile, pool, saveResults, withScratchDatabase } from '../support.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const [sourceDir, serverRootArg] = process.argv.slice(2);
const serverRoot = path.resolve(serverRootArg ?? root);
/** Whether the measured server removes a deleted collection's rows after answering (collections/purge.ts). */
const purges = existsSync(path.join(serverRoot, 'src/collections/purge.ts'));
/** Whether it removes a large replaced version after the replace commits. */
const retires = readFileSync(path.join(serverRoot, 'src/ingestion/worker.ts'), 'utf8').includes('removeRetired');
const DOCS = Number(process.env.BENCH_DOCS ?? 2_000);
const IDLE_MS = 3_000;
/** Probing goes on this long after the rows are gone (BENCH_TAIL_SECONDS, 35). */
const TAIL_MS = Number(process.env.BENCH_TAIL_SECONDS ?? 35) * 1_000;
/** BENCH_KEEP_DATA=1 without DATA_DIR: only ingest `bench` into a new embedded data directory, and keep it. */
const KEEP_ONLY = process.env.BENCH_KEEP_DATA === '1';
/** BENCH_ONE_DOCUMENT=1: `bench` holds (or is ingested as) one markdown document of the abstracts, and that document is deleted. */
const ONE_DOCUMENT = process.env.BENCH_ONE_DOCUMENT === '1' || process.env.BENCH_REPLACE === '1';
/** BENCH_REPLACE=1: that document is replaced by as many other abstracts instead of deleted. */
const REPLACE = process.env.BENCH_REPLACE === '1';
/** How long the bench waits, sending nothing, for deferred index cleanups after the tail. */
const CLEANUP_WAIT_MS = 30_000;
const adminKey = `bench_admin_${'x'.repeat(32)}`;
const corpus = sharedJsonLines<{ _id: string; title: string; text: string }>('scifact/corpus.jsonl');
const queries = sharedJsonLines<{ text: string }>('scifact/queries.jsonl').map((q) => q.text);

interface Server {
  child: ChildProcess;
  url: string;
  key: string;
  /** Resolves with the purge's log line, if the server writes one. */
  purged: Promise<Record<string, unknown>>;
  /** The embedded database's deferred index cleanups (src/db/maintenance.ts) so far: their log lines. */
  cleanups: Record<string, unknown>[];
}

async function startServer(env: Record<string, string>): Promise<Server> {
  const port = 18_000 + (process.pid % 1000);
  const child = spawn(process.execPath, [path.join(serverRoot, 'src/server.ts')], {
    env: {
      ...process.env,
      ...env,
      PORT: String(port),
      HOST: '127.0.0.1',
      RAGPORT_ADMIN_KEY: adminKey,
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const cleanups: Record<string, unknown>[] = [];
  const purged = new Promise<Record<string, unknown>>((resolve) => {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      if (line.includes('deferred index cleanup done')) cleanups.push(JSON.parse(line) as Record<string, unknown>);
      if (!line.includes(REPLACE ? 'replaced version removed' : 'deleted collection purged')) return;
      resolve(JSON.parse(line) as Record<string, unknown>);
    });
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  while (
    (await fetch(`${url}/readyz`).then(
      (r) => r.status,
      () => 0,
    )) !== 200
  ) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    if (Date.now() > deadline) throw new Error('server not ready after 120 s');
    await sleep(250);
  }
  return { child, url, key: adminKey, purged, cleanups };
}

async function stopServer(server: Server): Promise<void> {
  if (server.child.exitCode !== null) return;
  const exited = new Promise((resolve) => server.child.once('exit', resolve));
  server.child.kill('SIGTERM');
  await exited;
}

async function call<T>(server: Server, method: string, route: string, body?: unknown): Promise<T> {
  const answer = await api<T>(server, method, route, body);
  if (answer.status >= 300) throw new Error(`${method} ${route}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body;
}

/**
 * Uploads the abstracts to `collection` (one document each, or with `asOne` one markdown document
 * of them all) and waits until all are processed; its chunk count.
 */
async function ingest(server: Server, collection: string, docs: typeof corpus, asOne = false): Promise<number> {
  await call(server, 'POST', '/api/v1/rag/collections', { name: collection });
  if (asOne) {
    await call(server, 'POST', `/api/v1/rag/collections/${collection}/documents`, {
      name: 'abstracts.md',
      content: docs.map((d) => `## ${d.title}\n\n${d.text}`).join('\n\n'),
    });
    docs = docs.slice(0, 1);
  }
  await pool(asOne ? [] : docs, 8, (doc) =>
    call(server, 'POST', `/api/v1/rag/collections/${collection}/documents`, {
      name: `${doc._id}.txt`,
      content: doc.text,
      metadata: { title: doc.title },
    }),
  );
  for (;;) {
    const now = await call<{ document_count: number; chunk_count: number }>(
      server,
      'GET',
      `/api/v1/rag/collections/${collection}`,
    );
    if (now.document_count >= docs.length) return now.chunk_count;
    await sleep(1_000);
  }
}

const summary = (values: number[]) => ({
  n: values.length,
  p50: Math.round(percentile(values, 50) * 10) / 10,
  p99: Math.round(percentile(values, 99) * 10) / 10,
  max: Math.round(Math.max(...values) * 10) / 10,
});

/** /healthz, then a rag_search on `probe`, one after another, until `until` resolves. */
async function probe(server: Server, until: Promise<unknown>) {
  let done = false;
  void until.finally(() => (done = true));
  const healthz: number[] = [];
  const search: number[] = [];
  for (let q = 0; !done; q++) {
    let started = performance.now();
    await (await fetch(`${server.url}/healthz`)).arrayBuffer();
    healthz.push(performance.now() - started);
    started = performance.now();
    await call(server, 'POST', '/api/v1/agent/tool-calling', {
      tool_name: 'rag_search',
      parameters: { collection: 'probe', query: queries[q % queries.length], top_k: 10 },
    });
    search.push(performance.now() - started);
    await sleep(5);
  }
  return { healthz: summary(healthz), rag_search: summary(search) };
}

async function run(label: string, env: Record<string, string>, seeded: boolean) {
  const server = await startServer(env);
  try {
    if (KEEP_ONLY) {
      await ingest(server, 'bench', corpus.slice(0, DOCS), ONE_DOCUMENT);
      return undefined;
    }
    if (!seeded) await ingest(server, 'bench', corpus.slice(0, DOCS), ONE_DOCUMENT);
    // What is deleted: the collection, or its largest document.
    const { documents } = await call<{ documents: { id: string; chunk_count: number }[] }>(
      server,
      'GET',
      '/api/v1/rag/collections/bench/documents?page_size=100',
    );
    const largest = documents.reduce((a, b) => (b.chunk_count > a.chunk_count ? b : a));
    const chunks = ONE_DOCUMENT
      ? largest.chunk_count
      : (await call<{ chunk_count: number }>(server, 'GET', '/api/v1/rag/collections/bench')).chunk_count;
    await ingest(server, 'probe', corpus.slice(-50));
    await sleep(8_000); // the embedded database's first maintenance pass, after start
    const idle = await probe(server, sleep(IDLE_MS));
    const started = performance.now();
    let deleteMs = NaN;
    let goneMs = NaN;
    const deleted = (async () => {
      if (REPLACE) {
        await call(server, 'PUT', `/api/v1/rag/documents/${largest.id}`, {
          name: 'abstracts.md',
          content: corpus
            .slice(DOCS, 2 * DOCS)
            .map((d) => `## ${d.title}\n\n${d.text}`)
            .join('\n\n'),
        });
        await call(server, 'GET', `/api/v1/rag/documents/${largest.id}?wait=true&timeout=300`);
      } else {
        await call(
          server,
          'DELETE',
          ONE_DOCUMENT ? `/api/v1/rag/documents/${largest.id}` : '/api/v1/rag/collections/bench',
        );
      }
      deleteMs = performance.now() - started;
      // A document's rows are gone when its DELETE answers, and a collection's on a server without
      // a purger; a replaced version's when the replace commits on a server that does not retire it.
      const line = (purges && !ONE_DOCUMENT) || (REPLACE && retires) ? await server.purged : undefined;
      goneMs = performance.now() - started;
      return line;
    })();
    const [during, line] = await Promise.all([probe(server, deleted), deleted]);
    // What the dead rows cost after: the embedded database's maintenance vacuums them (a pass
    // every 30 s, once background work has been quiet for 2 s); autovacuum on a server.
    const after = await probe(server, sleep(TAIL_MS));
    // Then no requests: the embedded database's index cleanups deferred meanwhile run once it is
    // idle (5 s without a request); how long each held it.
    const quietUntil = performance.now() + CLEANUP_WAIT_MS;
    const before = server.cleanups.length;
    while (performance.now() < quietUntil && server.cleanups.length === before) await sleep(250);
    await sleep(server.cleanups.length > before ? 2_000 : 0);
    const cleanups = server.cleanups.map((l) => ({ table: l.table, owed_ms: l.owed_ms, duration_ms: l.duration_ms }));
    const recreate = performance.now();
    if (!ONE_DOCUMENT) await call(server, 'POST', '/api/v1/rag/collections', { name: 'bench' });
    const recreateMs = performance.now() - recreate;
    return {
      database: label,
      chunks,
      delete_ms: Math.round(deleteMs * 10) / 10,
      rows_gone_ms: Math.round(goneMs),
      purge: line ?? null,
      recreate_same_name_ms: Math.round(recreateMs * 10) / 10,
      idle,
      during,
      after,
      deferred_cleanups: cleanups,
    };
  } finally {
    await stopServer(server);
  }
}

const results: NonNullable<Awaited<ReturnType<typeof run>>>[] = [];
if (sourceDir) {
  const copy = mkdtempSync(path.join(tmpdir(), 'ragport-delete-bench-'));
  cpSync(sourceDir, copy, { recursive: true });
  try {
    const r = await run('embedded (PGlite)', { DATA_DIR: copy }, true);
    if (r) results.push(r);
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
} else if (process.env.BENCH_DATABASE_URL) {
  const r = await withScratchDatabase(process.env.BENCH_DATABASE_URL, 'ragport_delete_bench', (url) =>
    run('PostgreSQL server', { DATABASE_URL: url }, false),
  );
  if (r) results.push(r);
} else {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ragport-delete-bench-'));
  try {
    const r = await run('embedded (PGlite)', { DATA_DIR: dataDir }, false);
    if (r) results.push(r);
  } finally {
    if (KEEP_ONLY) console.error(`kept ${dataDir}`);
    else rmSync(dataDir, { recursive: true, force: true });
  }
}
if (KEEP_ONLY) process.exit(0);

const label = process.env.BENCH_LABEL ?? path.basename(serverRoot);
const ms = (s: { p50: number; p99: number; max: number }) => `${s.p50} / ${s.p99} / ${s.max}`;
console.log(
  `\n${REPLACE ? 'Replacing' : 'Deleting'} a large ${ONE_DOCUMENT ? 'document' : 'collection'} (${label}); ${cpus().length} cores, load ${loadavg()[0]?.toFixed(1)}. ` +
    'Probes p50 / p99 / max ms, one /healthz and one rag_search on another collection after another.\n',
);
console.log(
  '| database | chunks deleted | DELETE answered ms | rows gone after ms | /healthz idle | /healthz during | /healthz after | rag_search idle | rag_search during | rag_search after | same name again ms |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|---|');
for (const r of results)
  console.log(
    `| ${r.database} | ${r.chunks} | ${r.delete_ms} | ${r.rows_gone_ms} | ${ms(r.idle.healthz)} | ${ms(r.during.healthz)} | ${ms(r.after.healthz)} | ` +
      `${ms(r.idle.rag_search)} | ${ms(r.during.rag_search)} | ${ms(r.after.rag_search)} | ${r.recreate_same_name_ms} |`,
  );
for (const r of results)
  for (const c of r.deferred_cleanups)
    console.log(
      `\n${r.database}: deferred index cleanup of ${String(c.table)} once idle: ${String(c.duration_ms)} ms (owed ${String(c.owed_ms)} ms)`,
    );
saveResults(`delete-stall-${label}`, {
  label,
  docs: DOCS,
  one_document: ONE_DOCUMENT,
  replace: REPLACE,
  load: loadavg(),
  results,
});
process.exit(0);
