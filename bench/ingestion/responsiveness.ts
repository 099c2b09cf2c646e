/**
 * Responsiveness while a collection ingests (issue 14): a real ragport server (`node
 * src/server.ts`, a process of its own) ingests SciFact abstracts uploaded as fast as it accepts
 * them, while a second client sends a `/healthz` and a `rag_search` every 100 ms; the same probes
 * run first on the idle server, and searches back to back on the full collection after. Then the
 * chunks the server stored are embedded again by the same model, alone in this process, for the
 * pure embedding time ingestion is held to. Once on the embedded database and, with
 * BENCH_DATABASE_URL, once on that PostgreSQL server (in a database of its own, dropped after),
 * printed side by side.
 *
 *   MODELS_DIR=… node bench/ingestion/responsiveness.ts
 *   MODELS_DIR=… BENCH_DATABASE_URL=postgres://… node bench/ingestion/responsiveness.ts
 *
 * BENCH_ONLY=embedded|server runs one of the two. BENCH_SEED (200) documents are ingested before the idle probes, BENCH_DOCS (1500) during the
 * measured phase (with BENCH_ONE_DOCUMENT=1 as one markdown document of that many abstracts); BENCH_IDLE_SECONDS (10) of idle probes. BENCH_SERVER_NODE_OPTIONS: node options
 * for the server (a CPU profile of it: `--cpu-prof --cpu-prof-dir=…`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { sql } from '../../src/db/orm.ts';
import { loadConfig } from '../../src/config.ts';
import { openPglite, openPostgres, queryRows, type Database } from '../../src/db/client.ts';
import { loadLocalModel } from '../../src/embeddings/local.model.ts';
import { withTitle } from '../../src/ingestion/title.ts';
import { sharedJsonLines } from '../../test/support/fixtures.ts';
import { api, saveResults, withScratchDatabase } from '../support.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The checkout whose server is measured (another commit's worktree for a before/after). */
const serverRoot = path.resolve(process.env.BENCH_SERVER_ROOT ?? root);
const SEED = Number(process.env.BENCH_SEED ?? 200);
const DOCS = Number(process.env.BENCH_DOCS ?? 1_500);
const IDLE_MS = Number(process.env.BENCH_IDLE_SECONDS ?? 10) * 1_000;
const UPLOADERS = 8;
/** BENCH_ONE_DOCUMENT=1: the measured phase's abstracts arrive as one markdown document. */
const ONE_DOCUMENT = process.env.BENCH_ONE_DOCUMENT === '1';
/** Extra node options for the server, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`. */
const serverArgs = (process.env.BENCH_SERVER_NODE_OPTIONS ?? '').split(' ').filter(Boolean);
const adminKey = `bench_admin_${'x'.repeat(32)}`;
const metricsToken = 'bench-metrics-token-0123456789';

const corpus = sharedJsonLines<{ _id: string; title: string; text: string }>('scifact/corpus.jsonl').slice(
  0,
  SEED + DOCS,
);
const queries = sharedJsonLines<{ text: string }>('scifact/queries.jsonl').map((q) => q.text);

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });

const percentile = (values: number[], p: number) => {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
};
const summary = (values: number[]) => ({
  n: values.length,
  p50: percentile(values, 50),
  p99: percentile(values, 99),
  max: values.length ? Math.max(...values) : NaN,
});
const round = (x: number) => Math.round(x * 10) / 10;

interface Server {
  child: ChildProcess;
  url: string;
  key: string;
}

async function startServer(env: Record<string, string>): Promise<Server> {
  const port = await freePort();
  const child = spawn(process.execPath, [...serverArgs, path.join(serverRoot, 'src/server.ts')], {
    env: {
      ...process.env,
      ...env,
      PORT: String(port),
      HOST: '127.0.0.1',
      RAGPORT_ADMIN_KEY: adminKey,
      METRICS_TOKEN: metricsToken,
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    const ready = await fetch(`${url}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) throw new Error('server not ready after 120 s');
    await sleep(250);
  }
  const created = await call<{ key: string }>({ url, key: adminKey }, 'POST', '/api/v1/keys', {
    name: 'bench',
    scopes: ['admin'],
    tier: 'enterprise',
  });
  return { child, url, key: created.key };
}

async function stopServer(server: Server): Promise<void> {
  if (server.child.exitCode !== null) return;
  const exited = new Promise((resolve) => server.child.once('exit', resolve));
  server.child.kill('SIGTERM');
  await exited;
}

/** A request that must succeed: its body, or an error with the answer. */
async function call<T>(
  server: { url: string; key: string },
  method: string,
  route: string,
  body?: unknown,
): Promise<T> {
  const answer = await api<T>(server, method, route, body);
  if (answer.status >= 300) throw new Error(`${method} ${route}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body;
}

const counts = (server: Server) =>
  call<{ document_count: number; chunk_count: number }>(server, 'GET', '/api/v1/rag/collections/bench');

async function upload(server: Server, docs: typeof corpus): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: UPLOADERS }, async () => {
      while (next < docs.length) {
        const doc = docs[next++] as (typeof corpus)[number];
        await call(server, 'POST', '/api/v1/rag/collections/bench/documents', {
          name: `${doc._id}.txt`,
          content: doc.text,
          metadata: { title: doc.title },
        });
      }
    }),
  );
}

async function waitProcessed(server: Server, documents: number, timeoutMs: number): Promise<{ chunk_count: number }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const now = await counts(server);
    if (now.document_count >= documents) return now;
    if (Date.now() > deadline) throw new Error(`only ${now.document_count} of ${documents} documents processed`);
    await sleep(500);
  }
}

function rssMb(pid: number | undefined): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Math.round(Number(match[1]) / 1024) : NaN;
}

/** One probe after another until `until` resolves: /healthz, then a rag_search. */
async function probe(server: Server, until: Promise<unknown>, pause = 100) {
  let done = false;
  void until.finally(() => (done = true));
  let peakRss = rssMb(server.child.pid);
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssMb(server.child.pid))), 100);
  const healthz: number[] = [];
  const search: number[] = [];
  let q = 0;
  while (!done) {
    let started = performance.now();
    const health = await fetch(`${server.url}/healthz`);
    await health.arrayBuffer();
    healthz.push(performance.now() - started);
    started = performance.now();
    await call(server, 'POST', '/api/v1/agent/tool-calling', {
      tool_name: 'rag_search',
      parameters: { collection: 'bench', query: queries[q++ % queries.length], top_k: 10 },
    });
    search.push(performance.now() - started);
    if (pause > 0) await sleep(pause);
  }
  clearInterval(sampler);
  return { healthz: summary(healthz), rag_search: summary(search), peak_rss_mb: peakRss };
}

/** Cumulative counts of `ragport_database_wait_seconds{priority="interactive"}` by bucket bound (s). */
type WaitBuckets = Map<number, number>;

/** The server's event-loop lag and its embedded database's waits, from one scrape of /metrics. */
async function readMetrics(server: Server): Promise<{ p99_ms: number; max_ms: number; waits: WaitBuckets }> {
  const text = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } }).then(
    (r) => r.text(),
  );
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN) * 1000;
  const waits: WaitBuckets = new Map();
  for (const [, labels = '', count] of text.matchAll(/^ragport_database_wait_seconds_bucket\{([^}]*)\} (\S+)$/gm)) {
    if (!labels.includes('priority="interactive"')) continue;
    const le = /le="([^"]+)"/.exec(labels)?.[1];
    if (le !== undefined) waits.set(le === '+Inf' ? Infinity : Number(le), Number(count));
  }
  return {
    p99_ms: round(value('nodejs_eventloop_lag_p99_seconds')),
    max_ms: round(value('nodejs_eventloop_lag_max_seconds')),
    waits,
  };
}

/**
 * How long requests' statements waited for the embedded database between two scrapes (none on a
 * server): their number, the share that waited over 10 ms, and the bucket bound holding the 99th
 * percentile.
 */
function databaseWaits(from: WaitBuckets, to: WaitBuckets) {
  const bounds = [...to.keys()].sort((a, b) => a - b);
  const moved = (le: number) => (to.get(le) ?? 0) - (from.get(le) ?? 0);
  const total = moved(Infinity);
  if (total === 0) return undefined;
  const p99 = bounds.find((le) => moved(le) >= total * 0.99) ?? Infinity;
  return {
    statements: total,
    over_10ms: Math.round((1 - moved(0.01) / total) * 1000) / 1000,
    p99_at_most_ms: p99 === Infinity ? null : p99 * 1000,
  };
}

/** What the retrieval legs saw of each chunk ingested in the measured phase, read from the database. */
async function ingestedTexts(database: Database): Promise<string[]> {
  const seedIds = corpus.slice(0, SEED).map((d) => `${d._id}.txt`);
  const rows = await queryRows<{ content: string; title: string | null }>(
    database.db,
    sql`select c.content, d.metadata->>'title' as title
        from chunks c join documents d on d.id = c.document_id
        where not (d.name = any(array(select jsonb_array_elements_text(${JSON.stringify(seedIds)}::jsonb))))
        order by c.id`,
  );
  return rows.map((r) => withTitle(r.title ?? undefined, r.content));
}

async function run(label: string, databaseUrl: string | undefined) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ragport-ingest-bench-'));
  const server = await startServer({ DATA_DIR: dataDir, ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}) });
  try {
    await call(server, 'POST', '/api/v1/rag/collections', { name: 'bench' });
    await upload(server, corpus.slice(0, SEED));
    const seeded = await waitProcessed(server, SEED, 600_000);
    const idleRss = rssMb(server.child.pid);
    const idleStart = await readMetrics(server); // resets the histogram
    const idle = await probe(server, sleep(IDLE_MS));
    const idleLag = await readMetrics(server);

    const started = performance.now();
    const ingestion = (async () => {
      if (!ONE_DOCUMENT) {
        await upload(server, corpus.slice(SEED));
        return waitProcessed(server, SEED + DOCS, 1_800_000);
      }
      await call(server, 'POST', '/api/v1/rag/collections/bench/documents', {
        name: 'abstracts.md',
        content: corpus
          .slice(SEED)
          .map((d) => `## ${d.title}\n\n${d.text}`)
          .join('\n\n'),
        metadata: { title: 'SciFact abstracts' },
      });
      return waitProcessed(server, SEED + 1, 1_800_000);
    })();
    const during = await probe(server, ingestion);
    const ingested = await ingestion;
    const seconds = (performance.now() - started) / 1000;
    const duringLag = await readMetrics(server);
    const chunks = ingested.chunk_count - seeded.chunk_count;
    // The full collection, idle again: searches back to back.
    const after = await probe(server, sleep(IDLE_MS), 0);
    await stopServer(server);

    // The same chunk texts, embedded again by the same model with nothing else running.
    const database = databaseUrl
      ? openPostgres({ url: databaseUrl, poolSize: 2 })
      : await openPglite(path.join(dataDir, 'pg'));
    const texts = await ingestedTexts(database);
    await database.close();
    const config = loadConfig(process.env);
    const model = await loadLocalModel({
      id: config.embeddingModel,
      modelsDir: config.modelsDir,
      cacheDir: path.join(dataDir, 'models'),
      dtype: config.embeddingDtype,
    });
    await model.embed(texts.slice(0, 32), { priority: 'bulk' });
    const embedStarted = performance.now();
    for (let at = 0; at < texts.length; at += 32) await model.embed(texts.slice(at, at + 32), { priority: 'bulk' });
    const embedSeconds = (performance.now() - embedStarted) / 1000;

    return {
      database: label,
      chunks_total: ingested.chunk_count,
      rss_mb: { idle_with_model: idleRss, peak_during_ingestion: during.peak_rss_mb },
      idle,
      during,
      after,
      event_loop_lag: {
        idle: { p99_ms: idleLag.p99_ms, max_ms: idleLag.max_ms },
        during: { p99_ms: duringLag.p99_ms, max_ms: duringLag.max_ms },
      },
      // The embedded database only: requests' statements waiting for its one session.
      database_waits: {
        idle: databaseWaits(idleStart.waits, idleLag.waits),
        during: databaseWaits(idleLag.waits, duringLag.waits),
      },
      ingestion: {
        documents: ONE_DOCUMENT ? 1 : DOCS,
        chunks,
        seconds: round(seconds),
        chunks_per_s: round(chunks / seconds),
        pure_embedding_seconds: round(embedSeconds),
        pure_embedding_chunks_per_s: round(texts.length / embedSeconds),
        ratio_to_pure_embedding: Math.round((seconds / embedSeconds) * 100) / 100,
      },
    };
  } finally {
    await stopServer(server);
    if (process.env.BENCH_KEEP_DATA) console.error(`kept ${dataDir}`);
    else rmSync(dataDir, { recursive: true, force: true });
  }
}

/** BENCH_ONLY=embedded or server: one database instead of both. */
const only = process.env.BENCH_ONLY;
const results = only === 'server' ? [] : [await run('embedded (PGlite)', undefined)];
const serverUrl = process.env.BENCH_DATABASE_URL;
if (serverUrl && only !== 'embedded')
  results.push(await withScratchDatabase(serverUrl, 'ragport_ingest_bench', (url) => run('PostgreSQL server', url)));

const ms = (s: { p50: number; p99: number; max: number }) => `${round(s.p50)} / ${round(s.p99)} / ${round(s.max)}`;
const label = process.env.BENCH_LABEL ?? path.basename(serverRoot);
console.log(
  `\nIngestion responsiveness (${label}): ${SEED} documents seeded, ${DOCS} ${ONE_DOCUMENT ? 'abstracts as one document' : 'documents'} ingested while probing; ` +
    `${cpus().length} cores, load ${loadavg()[0]?.toFixed(1)}. Latencies p50 / p99 / max in ms; ` +
    '"full" is the whole collection idle after ingestion, searched back to back.\n',
);
console.log(
  '| database | chunks | /healthz idle | /healthz during | rag_search idle (seed) | rag_search during | rag_search full | event-loop lag p99/max idle → during ms | statements waiting for the embedded database > 10 ms, idle → during | RSS idle / peak MB | chunks/s | pure embedding chunks/s | ingestion ÷ pure embedding |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
const share = (w: ReturnType<typeof databaseWaits>) =>
  w === undefined ? '-' : `${Math.round(w.over_10ms * 100)} % (p99 ≤ ${w.p99_at_most_ms ?? '∞'} ms)`;
for (const r of results) {
  console.log(
    `| ${r.database} | ${r.chunks_total} | ${ms(r.idle.healthz)} | ${ms(r.during.healthz)} | ${ms(r.idle.rag_search)} | ${ms(r.during.rag_search)} | ${ms(r.after.rag_search)} | ` +
      `${r.event_loop_lag.idle.p99_ms}/${r.event_loop_lag.idle.max_ms} → ${r.event_loop_lag.during.p99_ms}/${r.event_loop_lag.during.max_ms} | ` +
      `${share(r.database_waits.idle)} → ${share(r.database_waits.during)} | ` +
      `${r.rss_mb.idle_with_model} / ${r.rss_mb.peak_during_ingestion} | ` +
      `${r.ingestion.chunks_per_s} | ${r.ingestion.pure_embedding_chunks_per_s} | ${r.ingestion.ratio_to_pure_embedding} |`,
  );
}
saveResults(`ingestion-responsiveness-${label}`, {
  label,
  seed: SEED,
  docs: DOCS,
  oneDocument: ONE_DOCUMENT,
  load: loadavg(),
  results,
});
process.exit(0);
