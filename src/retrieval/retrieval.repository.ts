import type { SQL } from 'drizzle-orm';
import { sql } from '../db/orm.ts';
import { queryRows, type Db } from '../db/client.ts';
import { hiddenChunkIds } from './index.repository.ts';
import { GENERIC_PLAN } from '../db/plan-hint.ts';

export type SearchMode = 'dense' | 'keyword' | 'hybrid';

export interface SearchQuery {
  collectionId: string;
  dimensions: number;
  vector: Float32Array;
  /** Analyzed query terms with their counts in the query. */
  terms: { term: string; count: number }[];
  mode: SearchMode;
  /** Candidates taken from each leg before fusion. */
  candidates: number;
  topK: number;
  threshold: number;
  /** Metadata filter on documents (alias d). */
  filter: SQL | undefined;
  /** Exact nearest neighbours instead of the HNSW index (selective filters, small sets). */
  exact: boolean;
  fusion: 'score' | 'rrf';
  rrfK: number;
  weights: { dense: number; keyword: number };
  /** The HNSW scan's candidate list, or `auto` (by the collection's size: `autoEfSearch`); never below `candidates`. */
  efSearch: number | 'auto';
  bm25: { k1: number; b: number };
  /** The BM25 leg's candidates (from `keywordCandidates`), best first. */
  keyword: KeywordCandidates;
}

/** The BM25 leg's candidates, best first, with their scores when those are already exact. */
export interface KeywordCandidates {
  ids: readonly string[];
  /**
   * Each candidate's BM25, present when every query term's whole posting list was read (no term
   * has more postings than `termPostings`): then the scores are exact and `search` does not score
   * these candidates again.
   */
  scores?: readonly number[] | undefined;
}

export interface KeywordQuery {
  collectionId: string;
  terms: { term: string; count: number }[];
  filter: SQL | undefined;
  candidates: number;
  bm25: { k1: number; b: number };
  /** Postings read per query term, best first by impact; 0 reads every posting (exact BM25). */
  termPostings: number;
}

export interface SearchHit {
  chunk_id: number;
  document_id: string;
  document_name: string;
  metadata: Record<string, unknown> | null;
  position: number;
  content: string;
  /** Cosine similarity of query and chunk. */
  similarity: number;
  /** The chunk's exact BM25 for the query; null when the keyword leg did not run. */
  bm25: number | null;
  fused: number;
}

const safeId = /^col_[A-Za-z0-9]+$/;

/**
 * A posting's impact: BM25's term-frequency part with k1 = 0.9, b = 0.4 and a nominal chunk length
 * of 100 terms. It only orders a posting list (the score itself uses the configured k1, b and the
 * collection's real average length); must stay identical to the expression of the index
 * chunk_terms_impact_idx (migrations/0004_bm25_term_stats.sql) for the index to serve it.
 */
const IMPACT = sql.raw('(p.tf::float8 / (p.tf::float8 + 0.54::float8 + 0.0036::float8 * p.length::float8))');

/**
 * The query's terms (qt), the collection's statistics (st) and the terms' document frequencies
 * (df), as CTEs, and BM25 of a posting `p` with them in scope (Lucene's IDF).
 */
function bm25Scope(col: SQL, terms: { term: string; count: number }[], bm25: { k1: number; b: number }) {
  // Typed parameters: an untyped `$n + 1` would make PostgreSQL read 0.9 as an integer.
  const k1 = sql`${bm25.k1}::float8`;
  const b = sql`${bm25.b}::float8`;
  return {
    // Per term and per collection, the parts of BM25 that do not depend on the posting, computed
    // once (a logarithm per posting was most of the keyword leg's arithmetic).
    ctes: sql`qt (term, qtf) as (
          select * from unnest(${sql.param(terms.map((t) => t.term))}::text[], ${sql.param(terms.map((t) => t.count))}::int[])),
        st as materialized (
          select greatest(chunk_count, 1)::float8 as n,
                 ${k1} * (1 - ${b}) as a,
                 ${k1} * ${b} / case when chunk_count > 0 then total_terms::float8 / chunk_count else 1 end as c
          from collection_stats where collection_id = ${col}),
        df as materialized (
          select s.term, s.df::float8 as df,
                 qt.qtf * ln(1 + (st.n - s.df + 0.5) / (s.df + 0.5)) * (${k1} + 1) as w
          from term_stats s join qt on qt.term = s.term cross join st
          where s.collection_id = ${col} and s.df > 0)`,
    score: sql`df.w * p.tf / (p.tf + st.a + st.c * p.length)`,
  };
}

/** Restricts chunks `c` to documents matching the filter. */
const filterClause = (col: SQL, filter: SQL | undefined) =>
  filter
    ? sql`and c.document_id in (select d.id from documents d where d.collection_id = ${col} and ${filter})`
    : sql``;

/**
 * A row count written into the statement rather than bound: a prepared statement's generic plan
 * (see pglite-statements.ts) cannot see a bound LIMIT, and planned `order by distance limit $n`
 * as a scan of every chunk and a sort instead of the HNSW index.
 */
function rowCount(n: number): SQL {
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`unexpected row count ${n}`);
  return sql.raw(String(n));
}

/**
 * Without a metadata filter, neither search statement's best plan depends on what is bound (the
 * collection and every row count are in the text): each runs on its generic plan (GENERIC_PLAN).
 * A filter's selectivity depends on its values, so a filtered search is planned for them.
 */
const planFor = (filter: SQL | undefined) => (filter ? sql`` : sql.raw(GENERIC_PLAN));

function collectionLiteral(collectionId: string): SQL {
  if (!safeId.test(collectionId)) throw new Error(`unexpected collection id ${collectionId}`);
  return sql.raw(`'${collectionId}'`);
}

/**
 * `HNSW_EF_SEARCH=auto`: the HNSW scan's candidate list for a collection of `chunks` chunks. A
 * graph search needs a longer list to keep its recall as the graph grows; measured recall@10
 * against an exact scan (docs/retrieval.md): 1.000 at 10k chunks with 100, 0.988 at 100k with 200,
 * 0.960 at 1M with 800 (0.873 with 200). Each step is the value measured inside its range.
 */
export function autoEfSearch(chunks: number): number {
  if (chunks < 50_000) return 100;
  if (chunks < 500_000) return 200;
  return 800;
}

/** How long a collection's chunk count is used for `autoEfSearch` before it is read again. */
const CHUNK_COUNT_TTL_MS = 10_000;

export interface RetrievalRepositoryOptions {
  /**
   * The database is one session that only this process uses (the embedded PGlite): the HNSW
   * settings are set on the session when they change, and a search is then one statement instead
   * of a transaction (begin, set, search, commit: four round trips between the threads).
   */
  oneSession?: boolean;
}

/**
 * What each one-session database has, as last set (see `oneSession`); per database, not per
 * repository, since every repository on it shares the session. Assigned before each SET is sent:
 * the session runs statements in the order they are sent, so this is what it will have.
 */
const sessionSettings = new WeakMap<Db, { efSearch: number }>();

/**
 * Per one-session database, the turn of the last search sent: a search's `SET` and its statement
 * go as a pair, after the previous pair has run. Without it, a search needing no `SET` could send
 * its statement after another search's `SET` of a different value (two collections of different
 * sizes, or two top_k), and run with that value.
 */
const sessionTurns = new WeakMap<Db, Promise<unknown>>();
function inSessionTurn<T>(db: Db, work: () => Promise<T>): Promise<T> {
  const previous = sessionTurns.get(db) ?? Promise.resolve();
  const turn = previous.then(work);
  sessionTurns.set(
    db,
    turn.catch(() => undefined),
  );
  return turn;
}

export function createRetrievalRepository(db: Db, options: RetrievalRepositoryOptions = {}) {
  const onSession = async (efSearch: number): Promise<void> => {
    const current = sessionSettings.get(db);
    if (current?.efSearch === efSearch) return;
    sessionSettings.set(db, { efSearch });
    try {
      // pgvector 0.8: keep scanning the graph until enough rows pass a filter. Without a filter
      // the first ef_search rows already fill the candidates, so it changes nothing there.
      if (current === undefined) await db.execute(sql.raw(`set hnsw.iterative_scan = relaxed_order`));
      await db.execute(sql.raw(`set hnsw.ef_search = ${efSearch}`));
    } catch (error) {
      sessionSettings.delete(db);
      throw error;
    }
  };

  // Collections' chunk counts for `autoEfSearch`, each read again after CHUNK_COUNT_TTL_MS: a
  // search pays one more round trip only when its collection's count is older than that.
  const chunkCounts = new Map<string, { chunks: number; readAt: number }>();
  const chunkCount = async (collectionId: string): Promise<number> => {
    const known = chunkCounts.get(collectionId);
    const now = performance.now();
    if (known !== undefined && now - known.readAt < CHUNK_COUNT_TTL_MS) return known.chunks;
    const [row] = await queryRows<{ n: number }>(
      db,
      sql`select chunk_count::int as n from collection_stats where collection_id = ${collectionId}`,
    );
    // Deleted collections' entries go with the rest now and then rather than one by one.
    if (chunkCounts.size >= 10_000) chunkCounts.clear();
    chunkCounts.set(collectionId, { chunks: row?.n ?? 0, readAt: now });
    return row?.n ?? 0;
  };
  const efSearchFor = async (q: SearchQuery): Promise<number> => {
    const ef = q.efSearch === 'auto' ? autoEfSearch(await chunkCount(q.collectionId)) : q.efSearch;
    return Math.max(10, Math.min(1000, Math.trunc(Math.max(ef, q.candidates))));
  };

  return {
    /**
     * Chunks of searchable documents matching the filter: decides between exact and ANN search. A
     * document being replaced (or whose replace failed) still has its previous version's chunks.
     */
    async countMatching(collectionId: string, filter: SQL): Promise<number> {
      const [row] = await queryRows<{ n: number }>(
        db,
        sql`select coalesce(sum(d.chunk_count), 0)::int as n from documents d
            where d.collection_id = ${collectionId} and d.processed_at is not null and ${filter}`,
      );
      return row?.n ?? 0;
    },

    /**
     * The BM25 leg's candidates: each query term's postings read best first by impact, at most
     * `termPostings` of them (0: all), summed per chunk. It needs no query vector, so it runs while
     * the query is being embedded; `search` then scores every candidate exactly.
     */
    async keywordCandidates(q: KeywordQuery): Promise<KeywordCandidates> {
      if (q.terms.length === 0) return { ids: [] };
      const col = collectionLiteral(q.collectionId);
      const { ctes, score } = bm25Scope(col, q.terms, q.bm25);
      // The filter applies inside the scan, so a selective filter still fills the list.
      const postings = sql`select chunk_id, tf, length from chunk_terms p
              where p.collection_id = ${col} and p.term = qt.term
              and p.chunk_id not in (${hiddenChunkIds(col)})
              ${q.filter ? sql`and p.chunk_id in (select c.id from chunks c where c.collection_id = ${col} ${filterClause(col, q.filter)})` : sql``}
              ${q.termPostings > 0 ? sql`order by ${IMPACT} desc limit ${rowCount(q.termPostings)}` : sql``}`;
      // Complete: no term's list was cut, so each candidate's sum is its exact BM25.
      const complete =
        q.termPostings > 0 ? sql`(select coalesce(bool_and(df.df <= ${q.termPostings}), true) from df)` : sql`true`;
      const rows = await queryRows<{ id: string | number; score: number; complete: boolean }>(
        db,
        sql`${planFor(q.filter)}with ${ctes}
            select p.chunk_id as id, sum(${score})::float8 as score, ${complete} as complete
            from qt join df on df.term = qt.term cross join lateral (${postings}) p cross join st
            group by p.chunk_id
            order by score desc, p.chunk_id limit ${rowCount(q.candidates)}`,
      );
      const ids = rows.map((r) => String(r.id));
      return rows[0]?.complete === true ? { ids, scores: rows.map((r) => r.score) } : { ids };
    },

    /**
     * One statement: the dense leg (HNSW, or exact) beside the BM25 leg's candidates, exact BM25
     * for every candidate, fusion (weighted normalised scores, or reciprocal ranks), then the
     * cosine threshold and top_k. Each hit carries its cosine, BM25 and fused score.
     */
    async search(q: SearchQuery): Promise<SearchHit[]> {
      const col = collectionLiteral(q.collectionId);
      const dim = sql.raw(String(q.dimensions));
      const vec = sql`${`[${Array.from(q.vector).join(',')}]`}::vector(${dim})`;
      const inFilter = filterClause(col, q.filter);
      const { ctes, score: bm25 } = bm25Scope(col, q.terms, q.bm25);
      const useDense = q.mode !== 'keyword';
      const useKeyword = q.mode !== 'dense' && q.keyword.ids.length > 0;
      // `+ 0` hides the ORDER BY from the HNSW index, forcing an exact scan of the filtered rows.
      const distance = q.exact
        ? sql`(c.embedding::vector(${dim}) <=> (select v from qv)) + 0`
        : sql`c.embedding::vector(${dim}) <=> (select v from qv)`;

      const dense = useDense
        ? sql`select c.id, ${distance} as dist from chunks c
              where c.collection_id = ${col} and c.id not in (${hiddenChunkIds(col)}) ${inFilter}
              order by ${distance} limit ${rowCount(q.candidates)}`
        : sql`select null::bigint as id, null::float8 as dist where false`;

      const keywordScores = q.keyword.scores;
      const keyword = useKeyword
        ? keywordScores
          ? sql`select * from unnest(${sql.param(q.keyword.ids)}::bigint[], ${sql.param(keywordScores)}::float8[]) as k(id, score)`
          : sql`select id, null::float8 as score from unnest(${sql.param(q.keyword.ids)}::bigint[]) as k(id)`
        : sql`select null::bigint as id, null::float8 as score where false`;
      // Every candidate of either leg gets its exact BM25 from its own postings: the capped scan
      // picked candidates, but a candidate it cut from one term's list would otherwise be scored
      // without that term. A candidate's postings are read by chunk id (an index-only scan of a few
      // contiguous entries) and matched to the query's terms through `df` (which holds them, with
      // their counts in the query): one hash of the terms for all candidates, where a join through
      // `qt` as well was planned as a hash built per candidate. `offset 0` keeps the planner from
      // probing the term-ordered indexes instead, whose posting lists it cannot see the length of
      // (a server read each term's whole list). Candidates whose exact BM25 the keyword leg already
      // has are not scored again.
      const rescored = useKeyword
        ? sql`select cand.id, sum(${bm25}) as score
              from (select id from dense where id not in (select id from keyword where score is not null)
                    union select id from keyword where score is null) cand
              cross join lateral (select term, tf, length from chunk_terms p where p.chunk_id = cand.id offset 0) p
              join df on df.term = p.term cross join st
              group by cand.id
              union all
              select id, score from keyword where score is not null`
        : sql`select null::bigint as id, null::float8 as score where false`;

      const wDense = sql`${q.mode === 'keyword' ? 0 : q.weights.dense}::float8`;
      const wKeyword = sql`${q.mode === 'dense' ? 0 : q.weights.keyword}::float8`;
      const fusion =
        q.fusion === 'score'
          ? // Each leg's score over the best among the candidates (cosine floored at 0), weighted.
            sql`${wDense} * greatest(s.similarity, 0) / greatest(max(s.similarity) over (), 1e-9)
                + ${wKeyword} * coalesce(s.bm25, 0) / greatest(max(s.bm25) over (), 1e-9)`
          : sql`coalesce(${wDense} / (${q.rrfK}::float8 + s.dense_rank), 0)
                + coalesce(${wKeyword} / (${q.rrfK}::float8 + s.keyword_rank), 0)`;

      // Single-leg modes rank by that leg's own score (the same order as their fused value, which is
      // monotone in it); hybrid by the fusion.
      const order =
        q.mode === 'dense' ? sql`f.similarity` : q.mode === 'keyword' ? sql`coalesce(f.bm25, 0)` : sql`f.fused`;

      const statement = sql`${planFor(q.filter)}
        with qv as (select ${vec} as v),
        ${ctes},
        dense as (${dense}),
        keyword as (${keyword}),
        rescored as (${rescored}),
        candidates as (
          select coalesce(d.id, k.id) as id,
                 row_number() over (partition by d.id is null order by d.dist, d.id) as dense_rank,
                 row_number() over (partition by k.id is null order by r.score desc nulls last, k.id) as keyword_rank,
                 r.score as bm25, d.dist, d.id is not null as in_dense, k.id is not null as in_keyword
          from dense d full outer join keyword k on k.id = d.id
          left join rescored r on r.id = coalesce(d.id, k.id)),
        -- The dense leg's candidates have their distance already; only the others read their vector.
        scored as (
          select s.*,
                 coalesce(1 - s.dist,
                          (select 1 - (c.embedding::vector(${dim}) <=> (select v from qv)) from chunks c where c.id = s.id)
                 )::float8 as similarity
          from candidates s),
        fused as (
          select s.id, s.similarity, s.bm25,
                 ${fusion} as fused
          from (select id, similarity, bm25,
                       case when in_dense then dense_rank end as dense_rank,
                       case when in_keyword then keyword_rank end as keyword_rank
                from scored) s),
        -- The text and the document of the top_k only (a document row is wide: it holds the original).
        best as (
          select f.* from fused f
          where f.similarity >= ${q.threshold}::float8
          order by ${order} desc, f.id
          limit ${rowCount(q.topK)})
        select c.id as chunk_id, c.document_id, doc.name as document_name, doc.metadata, c.position, c.content,
               f.similarity, ${q.mode === 'dense' ? sql`null::float8` : sql`coalesce(f.bm25, 0)::float8`} as bm25,
               f.fused::float8 as fused
        from best f
        join chunks c on c.id = f.id
        join documents doc on doc.id = c.document_id
        order by ${order} desc, c.id`;

      // An exact scan reads no HNSW setting: one statement, without the transaction around it (on
      // the embedded database a transaction holds the one session for all of its round trips).
      if (q.exact) return queryRows<SearchHit>(db, statement);
      const efSearch = await efSearchFor(q);
      if (options.oneSession) {
        return inSessionTurn(db, async () => {
          await onSession(efSearch);
          return queryRows<SearchHit>(db, statement);
        });
      }
      return db.transaction(async (tx) => {
        // pgvector 0.8: keep scanning the graph until enough rows pass the filter (a metadata
        // filter, or chunks of a version still being written, which are left out). One round trip.
        await tx.execute(
          sql`select set_config('hnsw.ef_search', ${String(efSearch)}, true),
                     set_config('hnsw.iterative_scan', 'relaxed_order', true)`,
        );
        return queryRows<SearchHit>(tx, statement);
      });
    },
  };
}

export type RetrievalRepository = ReturnType<typeof createRetrievalRepository>;
