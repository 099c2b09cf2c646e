/**
 * rag_search latency at 10k / 100k (/ 1M) chunks of 384 dimensions on a PostgreSQL server,
 * through the HTTP API with a real key, and recall@10 of the HNSW search against exact search.
 * Chunks are synthetic and inserted straight into the database: unit vectors scattered around
 * real embeddings of SciFact abstracts (so they live where real queries land), with
 * Zipf-distributed words for the BM25 leg. Queries are SciFact's real test queries.
 *
 *   MODELS_DIR=… DATABASE_URL=postgres://… LATENCY_SIZES=10000,100000 node bench/retrieval/latency.ts
 */
import { readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { queryRows } from '../../src/db/client.ts';
import { newId } from '../../src/db/ids.ts';
import { api, percentile, saveResults, startBenchServer } from '../support.ts';

const sizes = (process.env.LATENCY_SIZES ?? '10000,100000').split(',').map(Number);
const queriesPerSize = Number(process.env.LATENCY_QUERIES ?? 200);
const DIM = 384;
const server = await startBenchServer({ ingestionConcurrency: 0 });
if (server.database.kind !== 'postgres') throw new Error('set DATABASE_URL: this benchmark is for a PostgreSQL server');

// Deterministic pseudo-random numbers, so every run builds the same data.
let seed = 42;
const rand = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
const gauss = () => Math.sqrt(-2 * Math.log(rand() + 1e-12)) * Math.cos(2 * Math.PI * rand());
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
const vocabulary = Array.from({ length: 20_000 }, (_, i) => `w${i.toString(36)}`);
const zipfWord = () =>
  vocabulary[Math.min(vocabulary.length - 1, Math.floor(Math.exp(rand() * Math.log(vocabulary.length))) - 1)] as string;

const rows: Record<string, unknown>[] = [];
for (const size of sizes) {
  const name = `latency_${size}_${Date.now()}`;
  const created = await api<{ id: string }>(server, 'POST', '/api/v1/rag/collections', { name });
  const collectionId = created.body.id;
  const documentId = newId('doc');
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
  await server.database.db.execute(
    sql`update collection_stats set chunk_count = ${size}, total_terms = ${totalTerms} where collection_id = ${collectionId}`,
  );
  await server.database.db.execute(sql`vacuum analyze chunks`);
  await server.database.db.execute(sql`vacuum analyze chunk_terms`);
  const loadSeconds = (performance.now() - t0) / 1000;

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
      if (mode === 'dense' && i < 50) {
        const [vector] = (await resolved.model.embed([query], { asQuery: true })).vectors;
        const exact = await queryRows<{ content: string }>(
          server.database.db,
          sql.raw(
            `select content from chunks where collection_id = '${collectionId}' ` +
              `order by (embedding::vector(${DIM}) <=> '[${Array.from(vector as Float32Array).join(',')}]'::vector(${DIM})) + 0 limit 10`,
          ),
        );
        const annSet = new Set(r.body.results.map((h) => h.content));
        recalls.push(exact.filter((e) => annSet.has(e.content)).length / exact.length);
      }
    }
  }
  const row = {
    chunks: size,
    load_s: +loadSeconds.toFixed(1),
    dense_p50_ms: +percentile(latencies.dense, 50).toFixed(1),
    dense_p99_ms: +percentile(latencies.dense, 99).toFixed(1),
    hybrid_p50_ms: +percentile(latencies.hybrid, 50).toFixed(1),
    hybrid_p99_ms: +percentile(latencies.hybrid, 99).toFixed(1),
    recall_at_10: +(recalls.reduce((a, b) => a + b, 0) / recalls.length).toFixed(4),
  };
  rows.push(row);
  console.log(JSON.stringify(row));
}
console.log('\nchunks    load s  dense p50/p99 ms   hybrid p50/p99 ms   recall@10 (ANN vs exact)');
for (const r of rows) {
  console.log(
    `${String(r.chunks).padStart(8)}  ${String(r.load_s).padStart(6)}  ${String(r.dense_p50_ms).padStart(6)} / ${String(r.dense_p99_ms).padEnd(8)}  ${String(r.hybrid_p50_ms).padStart(6)} / ${String(r.hybrid_p99_ms).padEnd(8)}  ${String(r.recall_at_10)}`,
  );
}
console.log(
  'saved',
  saveResults('latency', { hnsw: server.config.hnsw, ef_search: server.config.retrieval.efSearch, rows }),
);
await server.close();
process.exit(0);
