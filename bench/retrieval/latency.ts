/**
 * rag_search latency at 10k / 100k (/ 1M) chunks of 384 dimensions on a PostgreSQL server,
 * through the HTTP API with a real key, and recall@10 of the HNSW search against exact search.
 * Chunks are synthetic and inserted straight into the database: unit vectors scattered around
 * real embeddings of SciFact abstracts (so they live where real queries land), with
 * Zipf-distributed SciFact terms for the BM25 leg. Queries are SciFact's real test queries.
 *
 * Rows are loaded with the collection's HNSW index dropped and the index is built afterwards (as an
 * operator would for a bulk import); each HNSW variant (m:ef_construction) rebuilds it, and each
 * ef_search value is measured on every variant. The service never searches with ef_search below its
 * candidate count (max(4 × top_k, 100)), so 100 is the floor.
 *
 *   MODELS_DIR=… DATABASE_URL=postgres://… LATENCY_SIZES=10000,100000 \
 *     LATENCY_HNSW=16:64,24:128 LATENCY_EF_SEARCH=100,200 node bench/retrieval/latency.ts
 */
import { readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { queryRows } from '../../src/db/client.ts';
import { newId } from '../../src/db/ids.ts';
import { analyze } from '../../src/retrieval/analyzer.ts';
import { gaussian, seededRandom } from '../../test/support/random.ts';
import { api, percentile, saveResults, startBenchServer } from '../support.ts';

const sizes = (process.env.LATENCY_SIZES ?? '10000,100000').split(',').map(Number);
const queriesPerSize = Number(process.env.LATENCY_QUERIES ?? 200);
const recallQueries = Math.min(queriesPerSize, Number(process.env.LATENCY_RECALL_QUERIES ?? 50));
const hnswVariants = (process.env.LATENCY_HNSW ?? '16:64').split(',').map((v) => {
  const [m, efConstruction] = v.split(':').map(Number);
  return { m: m as number, efConstruction: efConstruction as number };
});
const efSearchValues = (process.env.LATENCY_EF_SEARCH ?? '100').split(',').map(Number);
const DIM = 384;
const server = await startBenchServer({ ingestionConcurrency: 0 });
if (server.database.kind !== 'postgres') throw new Error('set DATABASE_URL: this benchmark is for a PostgreSQL server');

// Deterministic pseudo-random numbers, so every run builds the same data.
const rand = seededRandom(42);
const gauss = () => gaussian(rand);
const unit = (v: number[]) => {
  const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return v.map((x) => x / n);
};
const scifact = (name: string) =>
  readFileSync(new URL(`../../../shared/data/scifact/${name}`, import.meta.url), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { title?: string; text: string });
const loadModel = (await import('../../src/embeddings/load.ts')).loadEmbeddings;
const registry = await loadModel(server.config, (await import('pino')).pino({ level: 'warn' }));
const resolved = registry.resolve('text-embedding-ada-002');
if (!resolved.ok) throw new Error(resolved.message);
const anchors = scifact('corpus.jsonl')
  .slice(0, 1000)
  .map((d) => `${d.title ?? ''}. ${d.text}`);
const centers = (await resolved.model.embed(anchors, { priority: 'bulk' })).vectors.map((v) => Array.from(v));
const queryTexts = scifact('queries.jsonl').map((q) => q.text);
// The BM25 leg works on real terms: SciFact's analysed vocabulary, most frequent first, drawn with
// a Zipf law, so query terms hit posting lists as long as a real corpus of this size would have.
const termCounts = new Map<string, number>();
for (const doc of scifact('corpus.jsonl'))
  for (const term of analyze(`${doc.title ?? ''} ${doc.text}`)) termCounts.set(term, (termCounts.get(term) ?? 0) + 1);
const vocabulary = [...termCounts]
  .sort((a, b) => b[1] - a[1])
  .slice(0, 20_000)
  .map(([term]) => term);
const zipfWord = () =>
  vocabulary[Math.min(vocabulary.length - 1, Math.floor(Math.exp(rand() * Math.log(vocabulary.length))) - 1)] as string;

/** Synthetic chunks straight into the database, with the collection's index dropped (built later). */
async function load(collectionId: string, size: number): Promise<number> {
  const documentId = newId('doc');
  await server.database.db.execute(sql.raw(`drop index if exists "chunks_hnsw_${collectionId}"`));
  await server.database.db.execute(sql`
    insert into documents (id, collection_id, name, content_type, format, size_bytes, sha256, original, status, chunk_count)
    values (${documentId}, ${collectionId}, 'synthetic.txt', 'text/plain', 'txt', 0, ${documentId}, '\\x00'::bytea, 'processed', ${size})`);
  const t0 = performance.now();
  const batch = 1_000;
  let totalTerms = 0;
  for (let start = 0; start < size; start += batch) {
    const n = Math.min(batch, size - start);
    const vectors: string[] = [];
    const contents: string[] = [];
    const lengths: number[] = [];
    const postings: { term: string; position: number; tf: number; length: number }[] = [];
    for (let i = 0; i < n; i++) {
      const center = centers[Math.floor(rand() * centers.length)] as number[];
      vectors.push(`[${unit(center.map((c) => c + ((0.35 * gauss()) / Math.sqrt(DIM)) * 4)).join(',')}]`);
      const words = Array.from({ length: 40 }, zipfWord);
      const tf = new Map<string, number>();
      for (const w of words) tf.set(w, (tf.get(w) ?? 0) + 1);
      for (const [term, count] of tf) postings.push({ term, position: start + i, tf: count, length: words.length });
      contents.push(words.join(' '));
      lengths.push(words.length);
      totalTerms += words.length;
    }
    const ids = await queryRows<{ id: number; position: number }>(
      server.database.db,
      sql`insert into chunks (document_id, collection_id, position, start_char, end_char, token_count, term_count, content, model, embedding)
          select ${documentId}, ${collectionId}, p, 0, 0, 40, l, c, 'synthetic', v::vector
          from unnest(${sql.param(Array.from({ length: n }, (_, i) => start + i))}::int[], ${sql.param(lengths)}::int[],
                      ${sql.param(contents)}::text[], ${sql.param(vectors)}::text[]) as t(p, l, c, v)
          returning id, position`,
    );
    const idOf = new Map(ids.map((r) => [r.position, r.id]));
    await server.database.db.execute(sql`
      insert into chunk_terms (collection_id, term, chunk_id, tf, length)
      select ${collectionId}, * from unnest(${sql.param(postings.map((p) => p.term))}::text[],
        ${sql.param(postings.map((p) => idOf.get(p.position) as number))}::bigint[],
        ${sql.param(postings.map((p) => p.tf))}::int[], ${sql.param(postings.map((p) => p.length))}::int[])`);
  }
  await server.database.db.execute(sql`
    insert into term_stats (collection_id, term, df)
    select collection_id, term, count(*)::int from chunk_terms where collection_id = ${collectionId} group by 1, 2`);
  await server.database.db.execute(
    sql`update collection_stats set chunk_count = ${size}, total_terms = ${totalTerms} where collection_id = ${collectionId}`,
  );
  await server.database.db.execute(sql`vacuum analyze chunks`);
  await server.database.db.execute(sql`vacuum analyze chunk_terms`);
  // Synthetic data must not repeat itself: HNSW stores identical vectors once, which would flatter it.
  const [distinct] = await queryRows<{ n: number }>(
    server.database.db,
    sql`select count(distinct content)::int as n from chunks where collection_id = ${collectionId}`,
  );
  if ((distinct?.n ?? 0) < size * 0.999) throw new Error(`only ${distinct?.n} distinct chunks of ${size}`);
  return (performance.now() - t0) / 1000;
}

const reuse = process.env.LATENCY_REUSE === '1';
const rows: Record<string, unknown>[] = [];
for (const size of sizes) {
  // LATENCY_REUSE=1 keeps a loaded collection between runs (load once, measure when the machine is quiet).
  const name = reuse ? `latency_${size}` : `latency_${size}_${Date.now()}`;
  const existing = await api<{ id: string; chunk_count: number }>(server, 'GET', `/api/v1/rag/collections/${name}`);
  const reused = reuse && existing.status === 200 && existing.body.chunk_count === size;
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
      server.database.db,
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
      server.database.db,
      sql.raw(`select reloptions as options from pg_class where oid = to_regclass('${indexName}')`),
    );
    const wanted = [`m=${hnsw.m}`, `ef_construction=${hnsw.efConstruction}`];
    const built = current?.options?.length === 2 && wanted.every((o) => current.options?.includes(o));
    if (!built)
      await server.database.db.transaction(async (tx) => {
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
    await server.database.db.execute(sql`analyze chunks`);
    const buildSeconds = built ? null : (performance.now() - b0) / 1000;
    const [indexSize] = await queryRows<{ bytes: string }>(
      server.database.db,
      sql.raw(`select pg_relation_size('${indexName}')::text as bytes`),
    );

    for (const efSearch of efSearchValues) {
      server.config.retrieval.efSearch = efSearch;
      const latencies: Record<'dense' | 'hybrid', number[]> = { dense: [], hybrid: [] };
      const recalls: number[] = [];
      for (let i = 0; i < queriesPerSize; i++) {
        const query = queryTexts[i % queryTexts.length] as string;
        for (const mode of ['dense', 'hybrid'] as const) {
          const start = performance.now();
          const r = await api<{ results: { content: string }[] }>(server, 'POST', '/api/v1/agent/tool-calling', {
            tool_name: 'rag_search',
            parameters: { query, collection: name, top_k: 10, similarity_threshold: -1, mode },
          });
          latencies[mode].push(performance.now() - start);
          if (r.status !== 200) throw new Error(JSON.stringify(r.body));
          const exact = exactTop.get(query);
          if (mode === 'dense' && i < recallQueries && exact) {
            recalls.push(r.body.results.filter((h) => exact.has(h.content)).length / exact.size);
          }
        }
      }
      const row = {
        chunks: size,
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
        recall_at_10: +(recalls.reduce((a, b) => a + b, 0) / recalls.length).toFixed(4),
      };
      rows.push(row);
      console.log(JSON.stringify(row));
    }
  }
  // Leave the server's default index behind so the collection stays searchable as created.
  if (!reuse && process.env.LATENCY_KEEP !== '1') await api(server, 'DELETE', `/api/v1/rag/collections/${name}`);
}
console.log('\n  chunks  m  ef_c  ef_s  load s  build s  index MB  dense p50/p99 ms  hybrid p50/p99 ms  recall@10');
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
  ];
  console.log(cells.join('  '));
}
console.log('saved', saveResults('latency', { rows }));
await server.close();
process.exit(0);
