/**
 * BEIR SciFact through the HTTP API: ingestion throughput (and its ratio to pure embedding time
 * of the same chunks), then every test query through rag_search in dense, keyword and hybrid
 * modes: nDCG@10 and recall@100, then at top_k 10 under each `BM25_TERM_POSTINGS`,
 * `RETRIEVAL_CANDIDATES` and `HNSW_EF_SEARCH`, then hybrid search under each fusion setting (score
 * weights, RRF constants) on the train queries, where the defaults are chosen, and on the test
 * queries.
 *
 *   MODELS_DIR=… node bench/retrieval/scifact.ts            (embedded PGlite in a temp dir)
 *   MODELS_DIR=… DATABASE_URL=postgres://… node bench/retrieval/scifact.ts
 * Env: SCIFACT_DOCS (limit the corpus), INGESTION_CONCURRENCY, CHUNK_TOKENS, … as for the server.
 */
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { api, percentile, pool, saveResults, startBenchServer } from '../support.ts';
import { sharedLines } from '../../test/support/fixtures.ts';

const lines = (name: string) => sharedLines(`scifact/${name}`);

const limit = Number(process.env.SCIFACT_DOCS ?? Infinity);
const corpus = lines('corpus.jsonl')
  .map((l) => JSON.parse(l) as { _id: string; title: string; text: string })
  .slice(0, limit);
// Test queries are what is reported; train queries (a disjoint set) are what fusion settings are
// chosen on, so the reported numbers are not tuned on themselves.
const qrels = new Map<string, Map<string, number>>();
const split = (name: string) => {
  const ids = new Set<string>();
  for (const line of lines(`qrels/${name}.tsv`).slice(1)) {
    const [q, d, s] = line.split('\t') as [string, string, string];
    if (!qrels.has(q)) qrels.set(q, new Map());
    qrels.get(q)?.set(d, Number(s));
    ids.add(q);
  }
  return lines('queries.jsonl')
    .map((l) => JSON.parse(l) as { _id: string; text: string })
    .filter((q) => ids.has(q._id));
};
const queries = split('test');
const trainQueries = split('train');

function ndcgAt10(ranked: string[], relevant: Map<string, number>): number {
  const dcg = ranked.slice(0, 10).reduce((s, d, i) => s + (2 ** (relevant.get(d) ?? 0) - 1) / Math.log2(i + 2), 0);
  const ideal = [...relevant.values()].sort((a, b) => b - a).slice(0, 10);
  const idcg = ideal.reduce((s, r, i) => s + (2 ** r - 1) / Math.log2(i + 2), 0);
  return idcg === 0 ? 0 : dcg / idcg;
}
const recallAt100 = (ranked: string[], relevant: Map<string, number>) =>
  [...relevant.keys()].filter((d) => ranked.slice(0, 100).includes(d)).length / relevant.size;
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Chunk hits to documents, first occurrence wins. */
const toDocs = (results: { metadata: { document_name: string } }[]) => [
  ...new Set(results.map((r) => r.metadata.document_name.replace(/\.txt$/, ''))),
];

const server = await startBenchServer();
// SCIFACT_COLLECTION names a collection this script ingested before: measure retrieval only.
const reused = process.env.SCIFACT_COLLECTION;
const collection = reused ?? `scifact_${Date.now()}`;
const collectionId = async () =>
  (await api<{ id: string }>(server, 'GET', `/api/v1/rag/collections/${collection}`)).body.id;
let ingest: {
  upload_ms: number;
  total_ms: number;
  docs_per_s: number;
  pure_embedding_ms: number;
  ratio_to_embedding: number;
} | null = null;
if (reused === undefined) {
  await api(server, 'POST', '/api/v1/rag/collections', { name: collection });
  console.log(
    `ingesting ${corpus.length} documents (INGESTION_CONCURRENCY=${server.config.ingestionConcurrency}, CHUNK_TOKENS=${server.config.chunking.maxTokens})`,
  );
  const t0 = performance.now();
  await pool(corpus, 16, async (doc) => {
    const r = await api(server, 'POST', `/api/v1/rag/collections/${collection}/documents`, {
      name: `${doc._id}.txt`,
      content: `${doc.title}\n\n${doc.text}`,
      metadata: { doc_id: doc._id },
    });
    if (r.status !== 202) throw new Error(`upload ${doc._id}: ${r.status} ${JSON.stringify(r.body)}`);
  });
  const uploadMs = performance.now() - t0;
  const id = await collectionId();
  for (;;) {
    const { body } = await api<{ document_count: number }>(server, 'GET', `/api/v1/rag/collections/${collection}`);
    const [failed] = await queryRows<{ n: number }>(
      server.database.db,
      sql`select count(*)::int as n from documents where collection_id = ${id} and status = 'failed'`,
    );
    if ((failed?.n ?? 0) > 0) throw new Error(`${failed?.n} documents failed`);
    if (body.document_count === corpus.length) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  const ingestMs = performance.now() - t0;

  // Pure embedding time of the very same chunks, same model, same batcher, nothing else.
  const chunkTexts = (
    await queryRows<{ content: string }>(
      server.database.db,
      sql`select content from chunks where collection_id = ${id} order by id`,
    )
  ).map((r) => r.content);
  const resolved = (await import('../../src/embeddings/load.ts')).loadEmbeddings;
  const registry = await resolved(server.config, (await import('pino')).pino({ level: 'warn' }));
  const model = await registry.resolve('text-embedding-ada-002');
  if (!model.ok) throw new Error(model.message);
  const t1 = performance.now();
  for (let i = 0; i < chunkTexts.length; i += 512)
    await model.model.embed(chunkTexts.slice(i, i + 512), { priority: 'bulk' });
  const embedMs = performance.now() - t1;
  ingest = {
    upload_ms: Math.round(uploadMs),
    total_ms: Math.round(ingestMs),
    docs_per_s: +(corpus.length / (ingestMs / 1000)).toFixed(1),
    pure_embedding_ms: Math.round(embedMs),
    ratio_to_embedding: +(ingestMs / embedMs).toFixed(2),
  };
}

const modes = ['dense', 'keyword', 'hybrid'] as const;
const rankings: Record<string, Map<string, string[]>> = {};
const latencies: Record<string, number[]> = {};
const metrics: Record<string, { ndcg10: number; recall100: number }> = {};
/** Every query of a split through rag_search in one mode: the document rankings, latencies and metrics. */
async function evaluate(mode: (typeof modes)[number], set = queries, topK = 100) {
  const ranking = new Map<string, string[]>();
  const times: number[] = [];
  await pool(set, 4, async (q) => {
    const start = performance.now();
    const r = await api<{ results: { metadata: { document_name: string } }[] }>(
      server,
      'POST',
      '/api/v1/agent/tool-calling',
      {
        tool_name: 'rag_search',
        parameters: { query: q.text, collection, top_k: topK, similarity_threshold: 0, mode },
      },
    );
    times.push(performance.now() - start);
    if (r.status !== 200) throw new Error(`query ${q._id}: ${r.status} ${JSON.stringify(r.body)}`);
    ranking.set(q._id, toDocs(r.body.results));
  });
  const quality = {
    ndcg10: mean(set.map((q) => ndcgAt10(ranking.get(q._id) ?? [], qrels.get(q._id) as Map<string, number>))),
    recall100: mean(set.map((q) => recallAt100(ranking.get(q._id) ?? [], qrels.get(q._id) as Map<string, number>))),
  };
  return { ranking, times, quality };
}

for (const mode of modes) {
  const { ranking, times, quality } = await evaluate(mode);
  rankings[mode] = ranking;
  latencies[mode] = times;
  metrics[mode] = quality;
}

// The same BM25 reading every posting (BM25_TERM_POSTINGS=0): what the per-term cap costs in quality.
const cap = server.config.retrieval.bm25.termPostings;
server.config.retrieval.bm25.termPostings = 0;
const uncapped = {
  keyword: (await evaluate('keyword')).quality,
  hybrid: (await evaluate('hybrid')).quality,
};
/**
 * One setting swept at top_k 10, as a client asks: a row per value and split (train, test) from
 * `row`, with `apply` setting the value before its rows. The caller restores the setting.
 */
async function sweepSetting<V, R>(
  values: readonly V[],
  apply: (value: V) => void,
  row: (value: V, split: 'train' | 'test', set: typeof queries) => Promise<R>,
): Promise<R[]> {
  const rows: R[] = [];
  for (const value of values) {
    apply(value);
    for (const [split, set] of [
      ['train', trainQueries],
      ['test', queries],
    ] as const)
      rows.push(await row(value, split, set));
  }
  return rows;
}
const ndcgAtTop10 = async (mode: (typeof modes)[number], set: typeof queries) =>
  (await evaluate(mode, set, 10)).quality.ndcg10;

// nDCG@10 under each cap (the legs' candidates are then 50 each, not the 400 of top_k 100).
const capSweep = await sweepSetting(
  [0, 250, 500, 1000, 2000],
  (n) => (server.config.retrieval.bm25.termPostings = n),
  async (n, split, set) => ({
    cap: n,
    split,
    keyword_ndcg10: await ndcgAtTop10('keyword', set),
    hybrid_ndcg10: await ndcgAtTop10('hybrid', set),
  }),
);
server.config.retrieval.bm25.termPostings = cap;

// Hybrid nDCG@10 under each RETRIEVAL_CANDIDATES (each leg's candidates for fusion).
const candidates = server.config.retrieval.candidates;
const candidateSweep = await sweepSetting(
  [25, 50, 100, 200],
  (n) => (server.config.retrieval.candidates = n),
  async (n, split, set) => ({ candidates: n, split, hybrid_ndcg10: await ndcgAtTop10('hybrid', set) }),
);
server.config.retrieval.candidates = candidates;

// Dense and hybrid nDCG@10 under each HNSW_EF_SEARCH (auto: by the collection's size).
const efSearch = server.config.retrieval.efSearch;
const efSweep = await sweepSetting(
  ['auto', 100, 200, 400] as const,
  (ef) => (server.config.retrieval.efSearch = ef),
  async (ef, split, set) => ({
    ef_search: ef,
    split,
    dense_ndcg10: await ndcgAtTop10('dense', set),
    hybrid_ndcg10: await ndcgAtTop10('hybrid', set),
  }),
);
server.config.retrieval.efSearch = efSearch;

// Fusion settings through the service itself: chosen on the train queries, reported on test.
const retrieval = server.config.retrieval;
const defaults = { fusion: retrieval.fusion, rrfK: retrieval.rrfK, weights: retrieval.weights };
const settings = [
  ...[0.5, 0.55, 0.6, 0.625, 0.65, 0.7].map((dense) => ({
    fusion: 'score' as const,
    rrfK: defaults.rrfK,
    weights: { dense, keyword: +(1 - dense).toFixed(3) },
  })),
  ...[10, 20, 60].map((rrfK) => ({ fusion: 'rrf' as const, rrfK, weights: { dense: 1, keyword: 1 } })),
];
const sweep: { setting: string; train_ndcg10: number; test_ndcg10: number }[] = [];
for (const setting of settings) {
  Object.assign(retrieval, setting);
  sweep.push({
    setting:
      setting.fusion === 'score'
        ? `score ${setting.weights.dense}/${setting.weights.keyword}`
        : `rrf k=${setting.rrfK}`,
    train_ndcg10: (await evaluate('hybrid', trainQueries)).quality.ndcg10,
    test_ndcg10: (await evaluate('hybrid')).quality.ndcg10,
  });
}
Object.assign(retrieval, defaults);

const [stats] = await queryRows<{ chunks: number; postings: number }>(
  server.database.db,
  sql`select (select count(*) from chunks where collection_id = ${await collectionId()})::int as chunks,
             (select count(*) from chunk_terms where collection_id = ${await collectionId()})::int as postings`,
);
const report = {
  database: server.database.kind,
  model: server.config.embeddingModel,
  dtype: server.config.embeddingDtype,
  chunking: server.config.chunking,
  retrieval: server.config.retrieval,
  documents: corpus.length,
  chunks: stats?.chunks,
  postings: stats?.postings,
  ingest,
  quality: metrics,
  quality_without_term_postings_cap: uncapped,
  term_postings_sweep_top_k_10: capSweep,
  candidates_sweep_top_k_10: candidateSweep,
  ef_search_sweep_top_k_10: efSweep,
  latency_ms: Object.fromEntries(
    modes.map((m) => [
      m,
      { p50: +percentile(latencies[m] ?? [], 50).toFixed(1), p99: +percentile(latencies[m] ?? [], 99).toFixed(1) },
    ]),
  ),
  fusion_sweep: sweep,
};
console.log(
  `\nSciFact (${corpus.length} docs, ${stats?.chunks} chunks, ${server.database.kind}, ${server.config.embeddingModel} ${server.config.embeddingDtype})`,
);
if (ingest)
  console.log(
    `ingest: ${ingest.docs_per_s} docs/s, ${(ingest.total_ms / 1000).toFixed(1)} s total; pure embedding ${(ingest.pure_embedding_ms / 1000).toFixed(1)} s; ratio ${ingest.ratio_to_embedding}`,
  );
console.log('mode     nDCG@10  recall@100  p50 ms  p99 ms');
for (const m of modes) {
  console.log(
    `${m.padEnd(8)} ${metrics[m]?.ndcg10.toFixed(4).padStart(7)}  ${metrics[m]?.recall100.toFixed(4).padStart(10)}  ${report.latency_ms[m]?.p50.toFixed(1).padStart(6)}  ${report.latency_ms[m]?.p99.toFixed(1).padStart(6)}`,
  );
}
console.log(
  `BM25 reading every posting (cap ${cap} off): keyword ${uncapped.keyword.ndcg10.toFixed(4)}, hybrid ${uncapped.hybrid.ndcg10.toFixed(4)} nDCG@10`,
);
console.log(`\nBM25_TERM_POSTINGS at top_k 10 (nDCG@10; 0 reads every posting; default ${cap})`);
console.log('cap    split  keyword  hybrid');
for (const r of capSweep)
  console.log(
    `${String(r.cap).padEnd(5)}  ${r.split.padEnd(5)}  ${r.keyword_ndcg10.toFixed(4)}   ${r.hybrid_ndcg10.toFixed(4)}`,
  );
console.log(
  `\nRETRIEVAL_CANDIDATES at top_k 10 (hybrid nDCG@10; each leg's candidates are max(4 x top_k, this); default ${candidates})`,
);
console.log('candidates  train   test');
for (const n of new Set(candidateSweep.map((r) => r.candidates))) {
  const at = (split: string) =>
    candidateSweep.find((r) => r.candidates === n && r.split === split)?.hybrid_ndcg10.toFixed(4);
  console.log(`${String(n).padEnd(10)}  ${at('train')}  ${at('test')}`);
}
console.log(`\nHNSW_EF_SEARCH at top_k 10 (nDCG@10; auto picks by collection size; default ${efSearch})`);
console.log('ef_search  split  dense   hybrid');
for (const r of efSweep)
  console.log(
    `${String(r.ef_search).padEnd(9)}  ${r.split.padEnd(5)}  ${r.dense_ndcg10.toFixed(4)}  ${r.hybrid_ndcg10.toFixed(4)}`,
  );
const defaultSetting =
  defaults.fusion === 'score'
    ? `score ${defaults.weights.dense}/${defaults.weights.keyword}`
    : `rrf k=${defaults.rrfK}`;
console.log(
  `\nhybrid fusion settings (${trainQueries.length} train / ${queries.length} test queries; default ${defaultSetting})`,
);
console.log('setting             train nDCG@10  test nDCG@10');
for (const r of sweep)
  console.log(
    `${r.setting.padEnd(18)}  ${r.train_ndcg10.toFixed(4).padStart(13)}  ${r.test_ndcg10.toFixed(4).padStart(12)}`,
  );
console.log('saved', saveResults('scifact', report));
await server.close();
process.exit(0);
