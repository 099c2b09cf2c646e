/**
 * An in-memory replica of the retrieval pipeline on BEIR SciFact, for quick what-ifs that would
 * take a full ingestion through the service: the service's chunker and embedding model, exact
 * dense search, BM25 with the service's analyzer and formula in plain JS, and both fusion methods
 * with each leg's top 100 (every candidate scored on both legs, as the service does), plus two
 * other normalisations of the score fusion (min-max, z-score). It printed the numbers behind the
 * chunk-header and fusion defaults; `bench/retrieval/scifact.ts` measures
 * the service itself. Embeddings are cached in the OS temp dir.
 *
 *   MODELS_DIR=… node bench/retrieval/scifact-lab.ts            (test queries, with title headers)
 *   SPLIT=train HEADERS=0 MODELS_DIR=… node bench/retrieval/scifact-lab.ts
 *   EMBEDDING_DTYPE=q8 BATCHING=padded MODELS_DIR=… node bench/retrieval/scifact-lab.ts   (an embedding option)
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config.ts';
import { loadLocalModel } from '../../src/embeddings/local.model.ts';
import { chunkText } from '../../src/ingestion/chunker.ts';
import { documentTitle, withTitle } from '../../src/ingestion/title.ts';
import { analyze } from '../../src/retrieval/analyzer.ts';
import { sharedLines } from '../../test/support/fixtures.ts';

const split = process.env.SPLIT ?? 'test';
const headers = process.env.HEADERS !== '0';
const DEPTH = 100;
const lines = (name: string) => sharedLines(`scifact/${name}`);
const corpus = lines('corpus.jsonl').map((l) => JSON.parse(l) as { _id: string; title: string; text: string });
const qrels = new Map<string, Map<string, number>>();
for (const line of lines(`qrels/${split}.tsv`).slice(1)) {
  const [q, d, s] = line.split('\t') as [string, string, string];
  if (!qrels.has(q)) qrels.set(q, new Map());
  qrels.get(q)?.set(d, Number(s));
}
const queries = lines('queries.jsonl')
  .map((l) => JSON.parse(l) as { _id: string; text: string })
  .filter((q) => qrels.has(q._id));

const config = loadConfig(process.env);
// BATCHING=padded|alone picks how the model runs batches (default: the model's own default).
const batching =
  process.env.BATCHING === 'padded' || process.env.BATCHING === 'alone' ? process.env.BATCHING : undefined;
const model = await loadLocalModel({
  id: config.embeddingModel,
  modelsDir: config.modelsDir,
  cacheDir: path.join(tmpdir(), 'ragport-models'),
  dtype: config.embeddingDtype,
  ...(batching ? { batching } : {}),
});
const cacheKey = `${model.name.replace(/\W/g, '_')}-${config.embeddingDtype}-${batching ?? 'default'}-${config.chunking.maxTokens}`;

// Chunks as the ingestion worker makes them (each document uploaded as "title\n\ntext").
const chunks: { doc: string; content: string; seen: string }[] = [];
for (const d of corpus) {
  const text = `${d.title}\n\n${d.text}`;
  const title = headers ? documentTitle(null, text) : undefined;
  const titleTokens = title === undefined ? 0 : ((await model.countTokens([title]))[0] ?? 0) + 2;
  const budget = Math.min(config.chunking.maxTokens, model.maxTokens - 2);
  const maxTokens = Math.min(budget, model.maxTokens - 2 - titleTokens);
  for (const c of await chunkText(text, model, { maxTokens, overlapTokens: config.chunking.overlapTokens }))
    chunks.push({ doc: d._id, content: c.content, seen: withTitle(title, c.content) });
}

async function embedCached(texts: string[], name: string, asQuery: boolean): Promise<Float32Array[]> {
  const file = path.join(tmpdir(), `ragport-lab-${cacheKey}-${name}.f32`);
  if (!existsSync(file)) {
    const all = new Float32Array(texts.length * model.dimensions);
    for (let i = 0; i < texts.length; i += 256) {
      const { vectors } = await model.embed(texts.slice(i, i + 256), { priority: 'bulk', asQuery });
      vectors.forEach((v, j) => all.set(v, (i + j) * model.dimensions));
    }
    writeFileSync(file, all);
  }
  const bytes = readFileSync(file);
  const all = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  return texts.map((_, i) => all.subarray(i * model.dimensions, (i + 1) * model.dimensions));
}
const chunkVectors = await embedCached(
  chunks.map((c) => c.seen),
  `chunks-${headers ? 'titled' : 'plain'}-${chunks.length}`,
  false,
);
const queryVectors = await embedCached(
  queries.map((q) => q.text),
  `queries-${split}`,
  true,
);

// BM25 exactly as the service scores it (Lucene's IDF, configured k1 and b, chunk-level lengths).
const { k1, b } = config.retrieval.bm25;
const postings = new Map<string, { chunk: number; tf: number }[]>();
const lengths = chunks.map((c, chunk) => {
  const terms = analyze(c.seen);
  const tf = new Map<string, number>();
  for (const t of terms) tf.set(t, (tf.get(t) ?? 0) + 1);
  for (const [term, n] of tf) {
    const list = postings.get(term) ?? [];
    list.push({ chunk, tf: n });
    postings.set(term, list);
  }
  return terms.length;
});
const avgdl = lengths.reduce((a, n) => a + n, 0) / chunks.length;
function bm25(query: string): Map<number, number> {
  const scores = new Map<number, number>();
  const qtf = new Map<string, number>();
  for (const t of analyze(query)) qtf.set(t, (qtf.get(t) ?? 0) + 1);
  for (const [term, count] of qtf) {
    const list = postings.get(term) ?? [];
    const idf = Math.log(1 + (chunks.length - list.length + 0.5) / (list.length + 0.5));
    for (const { chunk, tf } of list) {
      const norm = tf + k1 * (1 - b + (b * (lengths[chunk] as number)) / avgdl);
      scores.set(chunk, (scores.get(chunk) ?? 0) + (count * idf * tf * (k1 + 1)) / norm);
    }
  }
  return scores;
}
const dot = (a: Float32Array, c: Float32Array) => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += (a[i] as number) * (c[i] as number);
  return s;
};

interface Legs {
  cosine: Map<number, number>;
  keyword: Map<number, number>;
  dense: number[];
  bm25: number[];
}
const legs: Legs[] = queries.map((q, i) => {
  const v = queryVectors[i] as Float32Array;
  const keyword = bm25(q.text);
  const cosine = new Map(chunkVectors.map((c, j) => [j, dot(v, c)]));
  const top = (m: Map<number, number>) =>
    [...m]
      .sort((x, y) => y[1] - x[1])
      .slice(0, DEPTH)
      .map(([c]) => c);
  return { cosine, keyword, dense: top(cosine), bm25: top(keyword) };
});

function ndcg10(ranked: number[], relevant: Map<string, number>): number {
  const docs = [...new Set(ranked.map((c) => chunks[c]?.doc as string))].slice(0, 10);
  const dcg = docs.reduce((s, d, i) => s + (2 ** (relevant.get(d) ?? 0) - 1) / Math.log2(i + 2), 0);
  const ideal = [...relevant.values()].sort((x, y) => y - x).slice(0, 10);
  return dcg / ideal.reduce((s, r, i) => s + (2 ** r - 1) / Math.log2(i + 2), 0);
}
const evaluate = (rank: (l: Legs) => number[]) =>
  legs.reduce((s, l, i) => s + ndcg10(rank(l), qrels.get(queries[i]?._id as string) as Map<string, number>), 0) /
  legs.length;
const byScore = (ids: Iterable<number>, score: (c: number) => number) =>
  [...ids]
    .map((c) => [c, score(c)] as const)
    .sort((x, y) => y[1] - x[1])
    .map(([c]) => c);
const score = (dense: number) => (l: Legs) => {
  const best = { cosine: l.cosine.get(l.dense[0] as number) ?? 1, keyword: l.keyword.get(l.bm25[0] as number) ?? 1 };
  return byScore(
    new Set([...l.dense, ...l.bm25]),
    (c) =>
      (dense * Math.max(l.cosine.get(c) ?? 0, 0)) / best.cosine +
      ((1 - dense) * (l.keyword.get(c) ?? 0)) / best.keyword,
  );
};
/** Each leg's scores over the candidates mapped to [0, 1] by their min and max (Bruch et al.'s MM). */
const minMax = (dense: number) => (l: Legs) => {
  const ids = [...new Set([...l.dense, ...l.bm25])];
  const range = (m: Map<number, number>) => {
    const v = ids.map((c) => m.get(c) ?? 0);
    const lo = Math.min(...v);
    const hi = Math.max(...v);
    return (c: number) => (hi > lo ? ((m.get(c) ?? 0) - lo) / (hi - lo) : 0);
  };
  const d = range(l.cosine);
  const k = range(l.keyword);
  return byScore(ids, (c) => dense * d(c) + (1 - dense) * k(c));
};
/** Each leg's scores over the candidates as z-scores. */
const zScore = (dense: number) => (l: Legs) => {
  const ids = [...new Set([...l.dense, ...l.bm25])];
  const z = (m: Map<number, number>) => {
    const v = ids.map((c) => m.get(c) ?? 0);
    const mean = v.reduce((a, x) => a + x, 0) / v.length;
    const sd = Math.sqrt(v.reduce((a, x) => a + (x - mean) ** 2, 0) / v.length) || 1;
    return (c: number) => ((m.get(c) ?? 0) - mean) / sd;
  };
  const d = z(l.cosine);
  const k = z(l.keyword);
  return byScore(ids, (c) => dense * d(c) + (1 - dense) * k(c));
};
const rrf = (k: number) => (l: Legs) => {
  const fused = new Map<number, number>();
  for (const list of [l.dense, l.bm25]) list.forEach((c, r) => fused.set(c, (fused.get(c) ?? 0) + 1 / (k + r + 1)));
  return byScore(fused.keys(), (c) => fused.get(c) ?? 0);
};

console.log(
  `SciFact ${split} (${queries.length} queries), ${chunks.length} chunks, title headers ${headers ? 'on' : 'off'}, ${config.embeddingDtype} ${batching ?? 'default'} batching`,
);
console.log(`dense    ${evaluate((l) => l.dense).toFixed(4)}`);
console.log(`keyword  ${evaluate((l) => l.bm25).toFixed(4)}`);
for (const k of [10, 20, 60]) console.log(`rrf k=${k}`.padEnd(9), evaluate(rrf(k)).toFixed(4));
for (const dense of [0.5, 0.55, 0.6, 0.625, 0.65, 0.7])
  console.log(`score ${dense}/${+(1 - dense).toFixed(3)}`.padEnd(9), evaluate(score(dense)).toFixed(4));
for (const dense of [0.3, 0.4, 0.5, 0.6, 0.7])
  console.log(`min-max ${dense}/${+(1 - dense).toFixed(3)}`.padEnd(9), evaluate(minMax(dense)).toFixed(4));
for (const dense of [0.3, 0.4, 0.5, 0.6, 0.7])
  console.log(`z ${dense}/${+(1 - dense).toFixed(3)}`.padEnd(9), evaluate(zScore(dense)).toFixed(4));
process.exit(0);
