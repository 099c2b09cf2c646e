/**
 * rag_search latency at 10k / 100k / 1M chunks of 384 dimensions on a PostgreSQL server, through
 * the HTTP API with a real key, and recall@10 of the HNSW search against exact search. Queries are
 * SciFact's real test queries, embedded by the service's model.
 *
 * Data (`LATENCY_DATA`):
 *   manifold (default)  synthetic chunks on the manifold of real embeddings: each vector mixes a real
 *                       SciFact abstract embedding with two of its 20 nearest real neighbours (random
 *                       weights, the anchor dominant) plus a little isotropic noise, so neighbourhoods
 *                       have the low local dimension real text embeddings have.
 *   clusters            each vector a real abstract embedding drowned in isotropic Gaussian noise
 *                       (cosine ≈ 0.58 to its centre): every point in a cluster nearly equidistant from
 *                       the query, far harder for a graph index than real data (the 2026-11-23 runs).
 * The size `real` loads the 5,183 real abstracts themselves (their real embeddings and terms): the
 * yardstick the synthetic distributions are compared with. Synthetic chunks carry 40
 * Zipf-distributed SciFact terms for the BM25 leg.
 *
 * Rows go in with bulk-load settings (one transaction, foreign-key triggers off, the posting
 * indexes and the collection's HNSW index dropped and rebuilt afterwards, as an operator would for
 * an import); each HNSW variant (m:ef_construction) rebuilds the index, and each ef_search value is
 * measured on every variant. The service never searches with ef_search below its candidate count
 * (max(4 × top_k, RETRIEVAL_CANDIDATES)); ef_search 100 is the lowest measured here.
 * `LATENCY_EF_SEARCH` (auto) takes `auto` beside numbers: the server's default, by collection size.
 *
 *   MODELS_DIR=… DATABASE_URL=postgres://… LATENCY_SIZES=real,10000,100000 \
 *     LATENCY_HNSW=16:64,24:128 LATENCY_EF_SEARCH=100,200 node bench/retrieval/latency.ts
 * LATENCY_REUSE=1 keeps the loaded collections (load once, measure when the machine is quiet).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { newId } from '../../src/db/ids.ts';
import { analyze } from '../../src/retrieval/analyzer.ts';
import { gaussian, seededRandom } from '../../test/support/random.ts';
import { randomBase62 } from '../../src/db/ids.ts';
import { startServerProcess } from '../../test/support/processes.ts';
import { api, percentile, saveResults, startBenchServer } from '../support.ts';
import { sharedJsonLines } from '../../test/support/fixtures.ts';
import { startMockUpstream } from '../../test/support/mock-upstream.ts';

type Size = number | 'real';
const sizes: Size[] = (process.env.LATENCY_SIZES ?? '10000,100000')
  .split(',')
  .map((s) => (s === 'real' ? 'real' : Number(s)));
const distribution = process.env.LATENCY_DATA ?? 'manifold';
if (distribution !== 'manifold' && distribution !== 'clusters') throw new Error('LATENCY_DATA: manifold or clusters');
const queriesPerSize = Number(process.env.LATENCY_QUERIES ?? 200);
const recallQueries = Math.min(queriesPerSize, Number(process.env.LATENCY_RECALL_QUERIES ?? 50));
const hnswVariants = (process.env.LATENCY_HNSW ?? '16:128').split(',').map((v) => {
  const [m, efConstruction] = v.split(':').map(Number);
  return { m: m as number, efConstruction: efConstruction as number };
});
/** HNSW_EF_SEARCH values, `auto` (the default: by the collection's size) or numbers. */
const efSearchValues = (process.env.LATENCY_EF_SEARCH ?? 'auto')
  .split(',')
  .map((v): number | 'auto' => (v === 'auto' ? v : Number(v)));
const DIM = 384;
/**
 * `hybrid+rerank` sends each hybrid search's best 50 candidates to a rerank model: here a mock
 * provider on loopback answering at once in Jina's format (no cross-encoder can be obtained here),
 * so the row shows what the stage costs ragport (the candidates' text, the call, the reordering),
 * not a real model's inference time, which adds to it. LATENCY_RERANK=0 leaves the mode out.
 */
const withRerank = process.env.LATENCY_RERANK !== '0';
const RERANK_CANDIDATES = 50;
const reranker = withRerank ? await startMockUpstream({ record: false, models: ['mock-rerank'] }) : undefined;
/** The RAGPORT_CONFIG file naming that provider, in a directory removed at the end. */
const rerankConfigDir = reranker ? mkdtempSync(path.join(tmpdir(), 'ragport-latency-')) : undefined;
const rerankConfig = rerankConfigDir && path.join(rerankConfigDir, 'config.yaml');
if (reranker && rerankConfig)
  writeFileSync(
    rerankConfig,
    `providers:\n  - name: mock-rerank\n    base_url: ${reranker.url}\n    models: []\n    rerank_models: [mock-rerank]\n`,
  );
type Mode = 'dense' | 'hybrid' | 'hybrid+rerank';
const MODES: Mode[] = withRerank ? ['dense', 'hybrid', 'hybrid+rerank'] : ['dense', 'hybrid'];
const searchParameters = (query: string, collection: string, mode: Mode) =>
  mode === 'hybrid+rerank'
    ? {
        query,
        collection,
        top_k: 10,
        similarity_threshold: -1,
        mode: 'hybrid',
        rerank: { model: 'mock-rerank', candidates: RERANK_CANDIDATES },
      }
    : { query, collection, top_k: 10, similarity_threshold: -1, mode };
const server = await startBenchServer({ config: { ingestionConcurrency: 0 } });
if (server.database.kind !== 'postgres') throw new Error('set DATABASE_URL: this benchmark is for a PostgreSQL server');
const db = server.database.db;

// Deterministic pseudo-random numbers, so every run builds the same data.
const rand = seededRandom(42);
const gauss = () => gaussian(rand);
const unit = (v: Float64Array | number[]) => {
  let n = 0;
  for (const x of v) n += x * x;
  n = Math.sqrt(n);
  return Array.from(v, (x) => x / n);
};
const scifact = (name: string) => sharedJsonLines<{ title?: string; text: string }>(`scifact/${name}`);
const loadModel = (await import('../../src/embeddings/load.ts')).loadEmbeddings;
const registry = await loadModel(server.config, (await import('pino')).pino({ level: 'warn' }));
const resolved = await registry.resolve('text-embedding-ada-002');
if (!resolved.ok) throw new Error(resolved.message);
const abstracts = scifact('corpus.jsonl').map((d) => `${d.title ?? ''}. ${d.text}`);
const real = (await resolved.model.embed(abstracts, { priority: 'bulk' })).vectors.map((v) => Array.from(v));
// Each real embedding's 20 nearest real neighbours (the manifold generator mixes along them).
const neighbours = real.map((a, i) => {
  const best: { j: number; s: number }[] = [];
  for (let j = 0; j < real.length; j++) {
    if (j === i) continue;
    const b = real[j] as number[];
    let dot = 0;
    for (let d = 0; d < DIM; d++) dot += (a[d] as number) * (b[d] as number);
    if (best.length < 20 || dot > (best[best.length - 1] as { s: number }).s) {
      best.push({ j, s: dot });
      best.sort((x, y) => y.s - x.s);
      if (best.length > 20) best.pop();
    }
  }
  return best.map((x) => x.j);
});
const queryTexts = scifact('queries.jsonl').map((q) => q.text);
// The BM25 leg works on real terms: SciFact's analysed vocabulary, most frequent first, drawn with
// a Zipf law, so query terms hit posting lists as long as a real corpus of this size would have.
const termCounts = new Map<string, number>();
for (const text of abstracts) for (const term of analyze(text)) termCounts.set(term, (termCounts.get(term) ?? 0) + 1);
const vocabulary = [...termCounts]
  .sort((a, b) => b[1] - a[1])
  .slice(0, 20_000)
  .map(([term]) => term);
const zipfWord = () =>
  vocabulary[Math.min(vocabulary.length - 1, Math.floor(Math.exp(rand() * Math.log(vocabulary.length))) - 1)] as string;

function syntheticVector(): number[] {
  const anchor = Math.floor(rand() * real.length);
  const a = real[anchor] as number[];
  const v = new Float64Array(DIM);
  if (distribution === 'clusters') {
    for (let d = 0; d < DIM; d++) v[d] = (a[d] as number) + ((0.35 * gauss()) / Math.sqrt(DIM)) * 4;
    return unit(v);
  }
  const near = neighbours[anchor] as number[];
  const b = real[near[Math.floor(rand() * near.length)] as number] as number[];
  const c = real[near[Math.floor(rand() * near.length)] as number] as number[];
  const wb = 0.5 * rand();
  const wc = 0.5 * rand();
  for (let d = 0; d < DIM; d++)
    v[d] = (a[d] as number) + wb * (b[d] as number) + wc * (c[d] as number) + (0.1 * gauss()) / Math.sqrt(DIM);
  return unit(v);
}

/**
 * The service measured is its own process (`node src/server.ts`, as deployed) on the same database,
 * so the client's work and this script's data stay out of its event loop and heap.
 */
async function serverProcess(efSearch: number | 'auto') {
  const adminKey = `bench_${randomBase62(40)}`;
  const child = await startServerProcess({
    DATABASE_URL: server.config.databaseUrl as string,
    RAGPORT_ADMIN_KEY: adminKey,
    HNSW_EF_SEARCH: String(efSearch),
    INGESTION_CONCURRENCY: '0',
    LOG_LEVEL: 'warn',
    ...(rerankConfig ? { RAGPORT_CONFIG: rerankConfig } : {}),
  });
  const created = await api<{ key: string }>({ url: child.url, key: adminKey }, 'POST', '/api/v1/keys', {
    name: 'latency',
    scopes: ['admin'],
    tier: 'enterprise',
  });
  if (created.status !== 201) throw new Error(JSON.stringify(created.body));
  return { url: child.url, key: created.body.key, stop: () => child.stop() };
}

/** The chunk_terms indexes, dropped for a bulk load and rebuilt after it (sorting beats 35M inserts). */
async function postingIndexes(): Promise<{ drop: string; create: string }[]> {
  const primary = await queryRows<{ name: string; def: string }>(
    db,
    sql`select conname as name, pg_get_constraintdef(oid) as def from pg_constraint
        where conrelid = 'chunk_terms'::regclass and contype = 'p'`,
  );
  const others = await queryRows<{ name: string; def: string }>(
    db,
    sql`select c.relname as name, pg_get_indexdef(i.indexrelid) as def from pg_index i
        join pg_class c on c.oid = i.indexrelid where i.indrelid = 'chunk_terms'::regclass and not i.indisprimary`,
  );
  return [
    ...primary.map((p) => ({
      drop: `alter table chunk_terms drop constraint "${p.name}"`,
      create: `alter table chunk_terms add constraint "${p.name}" ${p.def}`,
    })),
    ...others.map((i) => ({ drop: `drop index "${i.name}"`, create: i.def })),
  ];
}

/** Chunks straight into the database in bulk, then the posting indexes and statistics. */
async function load(collectionId: string, size: Size): Promise<number> {
  const count = size === 'real' ? real.length : size;
  const documentId = newId('doc');
  await db.execute(sql.raw(`drop index if exists "chunks_hnsw_${collectionId}"`));
  const indexes = await postingIndexes();
  const t0 = performance.now();
  let totalTerms = 0;
  await db.transaction(async (tx) => {
    // Bulk-load settings: the rows are consistent by construction, so foreign-key triggers are off.
    await tx.execute(sql`set local session_replication_role = replica`);
    for (const index of indexes) await tx.execute(sql.raw(index.drop));
    await tx.execute(sql`
      insert into documents (id, collection_id, name, content_type, format, size_bytes, sha256, original, status, chunk_count, processed_at)
      values (${documentId}, ${collectionId}, 'synthetic.txt', 'text/plain', 'txt', 0, ${documentId}, '\\x00'::bytea, 'processed', ${count}, now())`);
    const batch = 5_000;
    for (let start = 0; start < count; start += batch) {
      const n = Math.min(batch, count - start);
      const vectors: string[] = [];
      const contents: string[] = [];
      const lengths: number[] = [];
      const postings: { term: string; position: number; tf: number; length: number }[] = [];
      for (let i = 0; i < n; i++) {
        const vector = size === 'real' ? (real[start + i] as number[]) : syntheticVector();
        vectors.push(`[${vector.map((x) => x.toFixed(6)).join(',')}]`);
        const text = size === 'real' ? (abstracts[start + i] as string) : '';
        const words = size === 'real' ? analyze(text) : Array.from({ length: 40 }, zipfWord);
        const tf = new Map<string, number>();
        for (const w of words) tf.set(w, (tf.get(w) ?? 0) + 1);
        for (const [term, c] of tf) postings.push({ term, position: start + i, tf: c, length: words.length });
        contents.push(size === 'real' ? text : words.join(' '));
        lengths.push(words.length);
        totalTerms += words.length;
      }
      const ids = await queryRows<{ id: number; position: number }>(
        tx,
        sql`insert into chunks (document_id, collection_id, position, start_char, end_char, token_count, term_count, content, model, embedding)
            select ${documentId}, ${collectionId}, p, 0, 0, l, l, c, 'synthetic', v::vector
            from unnest(${sql.param(Array.from({ length: n }, (_, i) => start + i))}::int[], ${sql.param(lengths)}::int[],
                        ${sql.param(contents)}::text[], ${sql.param(vectors)}::text[]) as t(p, l, c, v)
            returning id, position`,
      );
      const idOf = new Map(ids.map((r) => [r.position, r.id]));
      await tx.execute(sql`
        insert into chunk_terms (collection_id, term, chunk_id, tf, length)
        select ${collectionId}, * from unnest(${sql.param(postings.map((p) => p.term))}::text[],
          ${sql.param(postings.map((p) => idOf.get(p.position) as number))}::bigint[],
          ${sql.param(postings.map((p) => p.tf))}::int[], ${sql.param(postings.map((p) => p.length))}::int[])`);
    }
    await tx.execute(sql`set local maintenance_work_mem = '2GB'`);
    for (const index of indexes) await tx.execute(sql.raw(index.create));
    await tx.execute(sql`
      insert into term_stats (collection_id, term, df)
      select collection_id, term, count(*)::int from chunk_terms where collection_id = ${collectionId} group by 1, 2`);
    await tx.execute(
      sql`update collection_stats set chunk_count = ${count}, total_terms = ${totalTerms} where collection_id = ${collectionId}`,
    );
  });
  // Every table the load wrote, so no autovacuum pass lands in the measurement.
  await db.execute(sql`vacuum analyze chunks, chunk_terms, term_stats, collection_stats`);
  // Synthetic data must not repeat itself: HNSW stores identical vectors once, which would flatter it.
  const [distinct] = await queryRows<{ n: number }>(
    db,
    sql`select count(distinct embedding::text)::int as n from chunks where collection_id = ${collectionId}`,
  );
  if ((distinct?.n ?? 0) < count * 0.999) throw new Error(`only ${distinct?.n} distinct vectors of ${count}`);
  return (performance.now() - t0) / 1000;
}

/**
 * Every page of the posting and chunk tables all-visible before measuring: the BM25 leg reads
 * postings index-only, and a page VACUUM could not mark (a concurrent autovacuum analyze holds
 * the horizon back) costs a heap visit per posting — a 100k run measured that way had its keyword
 * leg at p50 19.7 ms instead of 4.9 ms.
 */
async function settle(): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    await db.execute(sql`vacuum chunks, chunk_terms`);
    const rows = await queryRows<{ name: string; pages: number; visible: number }>(
      db,
      sql`select relname as name, (pg_relation_size(oid) / current_setting('block_size')::int)::int as pages,
                 relallvisible as visible from pg_class where relname in ('chunks', 'chunk_terms')`,
    );
    if (rows.every((r) => r.visible >= r.pages)) return;
    if (attempt === 10) {
      console.error(`not all-visible after ${attempt} vacuums: ${JSON.stringify(rows)}`);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 3_000));
  }
}

const reuse = process.env.LATENCY_REUSE === '1';
const rows: Record<string, unknown>[] = [];
for (const size of sizes) {
  // LATENCY_REUSE=1 keeps a loaded collection between runs (load once, measure when the machine is quiet).
  const label = size === 'real' ? 'real' : `${distribution}_${size}`;
  const name = reuse ? `latency_${label}` : `latency_${label}_${Date.now()}`;
  const existing = await api<{ id: string; chunk_count: number }>(server, 'GET', `/api/v1/rag/collections/${name}`);
  const reused =
    reuse && existing.status === 200 && existing.body.chunk_count === (size === 'real' ? real.length : size);
  if (existing.status === 200 && !reused) await api(server, 'DELETE', `/api/v1/rag/collections/${name}`);
  const collectionId = reused
    ? existing.body.id
    : (await api<{ id: string }>(server, 'POST', '/api/v1/rag/collections', { name })).body.id;
  const indexName = `"chunks_hnsw_${collectionId}"`;
  const loadSeconds = reused ? null : await load(collectionId, size);
  // Exact top 10 per recall query, computed once per size (a sequential scan of every vector).
  const exactTop = new Map<string, Set<string>>();
  for (const query of queryTexts.slice(0, recallQueries)) {
    const [vector] = (await resolved.model.embed([query], { asQuery: true })).vectors;
    const exact = await queryRows<{ content: string }>(
      db,
      sql.raw(
        `select content from chunks where collection_id = '${collectionId}' ` +
          `order by (embedding::vector(${DIM}) <=> '[${Array.from(vector as Float32Array).join(',')}]'::vector(${DIM})) + 0 limit 10`,
      ),
    );
    exactTop.set(query, new Set(exact.map((e) => e.content)));
  }

  for (const hnsw of hnswVariants) {
    const b0 = performance.now();
    const [current] = await queryRows<{ options: string[] | null }>(
      db,
      sql.raw(`select reloptions as options from pg_class where oid = to_regclass('${indexName}')`),
    );
    const wanted = [`m=${hnsw.m}`, `ef_construction=${hnsw.efConstruction}`];
    const built = current?.options?.length === 2 && wanted.every((o) => current.options?.includes(o));
    if (!built)
      await db.transaction(async (tx) => {
        await tx.execute(sql.raw(`drop index if exists ${indexName}`));
        await tx.execute(sql.raw(`set local maintenance_work_mem = '${process.env.LATENCY_BUILD_MEMORY ?? '4GB'}'`));
        await tx.execute(sql.raw(`set local max_parallel_maintenance_workers = 1`));
        await tx.execute(
          sql.raw(
            `create index ${indexName} on chunks using hnsw ((embedding::vector(${DIM})) vector_cosine_ops) ` +
              `with (m = ${hnsw.m}, ef_construction = ${hnsw.efConstruction}) where collection_id = '${collectionId}'`,
          ),
        );
      });
    await db.execute(sql`analyze chunks`);
    const buildSeconds = built ? null : (performance.now() - b0) / 1000;
    await settle();
    const [indexSize] = await queryRows<{ bytes: string }>(
      db,
      sql.raw(`select pg_relation_size('${indexName}')::text as bytes`),
    );

    for (const efSearch of efSearchValues) {
      const measured = await serverProcess(efSearch);
      // Warm-up (JIT, model session, connection pool), not measured.
      for (const query of queryTexts.slice(-20))
        for (const mode of MODES)
          await api(measured, 'POST', '/api/v1/agent/tool-calling', {
            tool_name: 'rag_search',
            parameters: searchParameters(query, name, mode),
          });
      const latencies: Record<Mode, number[]> = { dense: [], hybrid: [], 'hybrid+rerank': [] };
      const recalls: number[] = [];
      const slowest: { ms: number; query: string }[] = [];
      for (let i = 0; i < queriesPerSize; i++) {
        const query = queryTexts[i % queryTexts.length] as string;
        // Whichever mode runs first for a query meets its index pages cold (at 1M the HNSW index
        // is 2 GB beside 256 MB of shared buffers): the order rotates so no mode always follows
        // another.
        const modes = MODES.map((_, j) => MODES[(i + j) % MODES.length] as Mode);
        for (const mode of modes) {
          const start = performance.now();
          const r = await api<{ results: { content: string }[] }>(measured, 'POST', '/api/v1/agent/tool-calling', {
            tool_name: 'rag_search',
            parameters: searchParameters(query, name, mode),
          });
          const ms = performance.now() - start;
          latencies[mode].push(ms);
          if (mode === 'hybrid') slowest.push({ ms, query });
          if (r.status !== 200) throw new Error(JSON.stringify(r.body));
          const exact = exactTop.get(query);
          if (mode === 'dense' && i < recallQueries && exact) {
            recalls.push(r.body.results.filter((h) => exact.has(h.content)).length / exact.size);
          }
        }
      }
      await measured.stop();
      // The tail, by query: whether it is a few queries (their terms) or the machine.
      for (const { ms, query } of slowest.sort((a, b) => b.ms - a.ms).slice(0, 5))
        console.error(`  slowest hybrid: ${ms.toFixed(1)} ms  ${query}`);
      const row = {
        chunks: size,
        data: size === 'real' ? 'real' : distribution,
        m: hnsw.m,
        ef_construction: hnsw.efConstruction,
        ef_search: efSearch,
        load_s: loadSeconds === null ? null : +loadSeconds.toFixed(1),
        build_s: buildSeconds === null ? null : +buildSeconds.toFixed(1),
        index_mb: Math.round(Number(indexSize?.bytes ?? 0) / 2 ** 20),
        dense_p50_ms: +percentile(latencies.dense, 50).toFixed(1),
        dense_p99_ms: +percentile(latencies.dense, 99).toFixed(1),
        hybrid_p50_ms: +percentile(latencies.hybrid, 50).toFixed(1),
        hybrid_p99_ms: +percentile(latencies.hybrid, 99).toFixed(1),
        ...(withRerank
          ? {
              rerank_candidates: RERANK_CANDIDATES,
              hybrid_rerank_p50_ms: +percentile(latencies['hybrid+rerank'], 50).toFixed(1),
              hybrid_rerank_p99_ms: +percentile(latencies['hybrid+rerank'], 99).toFixed(1),
            }
          : {}),
        recall_at_10: +(recalls.reduce((a, b) => a + b, 0) / recalls.length).toFixed(4),
      };
      rows.push(row);
      console.log(JSON.stringify(row));
    }
  }
  // Leave the server's default index behind so the collection stays searchable as created.
  if (!reuse && process.env.LATENCY_KEEP !== '1') await api(server, 'DELETE', `/api/v1/rag/collections/${name}`);
}
console.log(
  `\n  chunks  m  ef_c  ef_s  load s  build s  index MB  dense p50/p99 ms  hybrid p50/p99 ms  recall@10${withRerank ? `  hybrid+rerank ${RERANK_CANDIDATES} p50/p99 ms` : ''}`,
);
for (const r of rows) {
  const cells = [
    String(r.chunks).padStart(8),
    String(r.m).padStart(2),
    String(r.ef_construction).padStart(4),
    String(r.ef_search).padStart(4),
    String((r.load_s as number | null) ?? '-').padStart(6),
    String((r.build_s as number | null) ?? '-').padStart(7),
    String(r.index_mb).padStart(8),
    `${String(r.dense_p50_ms).padStart(6)} / ${String(r.dense_p99_ms).padEnd(8)}`,
    `${String(r.hybrid_p50_ms).padStart(7)} / ${String(r.hybrid_p99_ms).padEnd(8)}`,
    String(r.recall_at_10),
    ...(withRerank ? [`${String(r.hybrid_rerank_p50_ms).padStart(7)} / ${String(r.hybrid_rerank_p99_ms)}`] : []),
  ];
  console.log(cells.join('  '));
}
console.log('saved', saveResults('latency', { rows }));
await server.close();
await reranker?.close();
if (rerankConfigDir) rmSync(rerankConfigDir, { recursive: true, force: true });
process.exit(0);
