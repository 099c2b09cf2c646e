import type { CollectionsService } from '../collections/collections.service.ts';
import type { EmbeddingRegistry } from '../embeddings/registry.ts';
import { rerankModelNotFound, type RerankOutcome, type RerankRequest } from '../gateway/rerank.ts';
import { AppError } from '../errors.ts';
import type { Principal } from '../keys/principal.ts';
import { analyze } from './analyzer.ts';
import { compileFilters, type Filters } from './filters.ts';
import type { KeywordCandidates, RetrievalRepository, SearchMode } from './retrieval.repository.ts';
import { runInteractive } from '../db/priority.ts';

export interface RetrievalSettings {
  /** `score`: weighted sum of each leg's score over its best; `rrf`: reciprocal-rank fusion. */
  fusion: 'score' | 'rrf';
  rrfK: number;
  weights: { dense: number; keyword: number };
  /** BM25 parameters; `termPostings` caps the postings read per query term (0: all). */
  bm25: { k1: number; b: number; termPostings: number };
  /** Filtered searches over at most this many chunks are exact instead of approximate. */
  exactBelow: number;
  /** Candidates each leg contributes to fusion: this many, or 4 × top_k when that is more. */
  candidates: number;
  /** The HNSW scan's candidate list (raised to the candidate count), or `auto`: by the collection's size. */
  efSearch: number | 'auto';
}

export interface SearchRequest {
  query: string;
  collection: string;
  topK: number;
  threshold: number;
  filters?: Filters | undefined;
  mode: SearchMode;
  /** Fusion weights for this request (hybrid); the configured ones where absent. */
  weights?: { dense?: number | undefined; keyword?: number | undefined } | undefined;
  /** Rerank the best `candidates` fused results with `model`, keeping the best top_k of them. */
  rerank?: { model: string; candidates: number } | undefined;
}

/** The scores behind a result's rank: the last of them that applies decides the order; `score` is `dense`. */
export interface ScoreBreakdown {
  /** Cosine similarity of query and chunk (what similarity_threshold applies to). */
  dense: number;
  /** BM25 of the chunk for the query (keyword and hybrid modes). */
  keyword?: number;
  /** The fusion of both legs (hybrid mode). */
  fused?: number;
  /** The reranker's relevance score (when the request reranked). */
  rerank?: number;
}

/** One chunk rag_search found: the text, where it comes from and how it scored. */
export interface RetrievedChunk {
  document_id: string;
  /**
   * The cosine similarity of query and chunk, as the contract defines `score` (what
   * similarity_threshold applies to). Results are ordered by `scores.rerank`, else `scores.fused`
   * (hybrid), else the mode's own leg: in hybrid and rerank modes the order is not the score's.
   */
  score: number;
  content: string;
  metadata: Record<string, unknown> & { title: string; path: string };
  scores: ScoreBreakdown;
}

export interface RetrievalDeps {
  repo: RetrievalRepository;
  collections: CollectionsService;
  embeddings: EmbeddingRegistry;
  settings: RetrievalSettings;
  /** Upstream rerankers (the gateway's); usage is counted against the searching key. */
  rerank?: (keyId: string, request: RerankRequest, signal?: AbortSignal) => Promise<RerankOutcome>;
  /** Whether a provider serves a rerank model: checked before the search, whatever it finds. */
  rerankServes?: (model: string) => Promise<boolean>;
}

/** Hybrid retrieval over one collection, shared by rag_search and chatbots. */
export function createRetrievalService({
  repo,
  collections,
  embeddings,
  settings,
  rerank,
  rerankServes,
}: RetrievalDeps) {
  async function searchNow(
    principal: Principal,
    request: SearchRequest,
    signal?: AbortSignal,
  ): Promise<RetrievedChunk[]> {
    const collection = await collections.requireAccessible(principal, request.collection);
    const filter = compileFilters(request.filters);
    const resolved = await embeddings.forCollection({
      provider: collection.embeddingProvider,
      model: collection.embeddingModelResolved,
      dimensions: collection.dimensions,
    });
    if (!resolved.ok) throw new AppError({ code: 'service_unavailable', message: resolved.message });
    const counts = new Map<string, number>();
    for (const term of analyze(request.query)) counts.set(term, (counts.get(term) ?? 0) + 1);
    const terms = [...counts].map(([term, count]) => ({ term, count }));
    // With a rerank stage the fused list is cut at its candidate count, then reranked to top_k.
    const fusedK = request.rerank ? Math.max(request.topK, request.rerank.candidates) : request.topK;
    const candidates = Math.max(fusedK * 4, settings.candidates);
    const bm25 = { k1: settings.bm25.k1, b: settings.bm25.b };
    // The BM25 leg needs no vector: it runs on its own connection while the query is embedded
    // (with the collection's own model: vector spaces are never mixed).
    const keywordCandidates = () =>
      repo.keywordCandidates({
        collectionId: collection.id,
        terms,
        filter,
        candidates,
        bm25,
        termPostings: settings.bm25.termPostings,
      });
    const [keyword, { vectors }, exact] = await Promise.all([
      request.mode === 'dense' ? { ids: [] } : keywordCandidates(),
      resolved.model.embed([request.query], {
        priority: 'interactive',
        asQuery: true,
        keyId: principal.keyId,
        ...(signal ? { signal } : {}),
      }),
      filter !== undefined && repo.countMatching(collection.id, filter).then((n) => n <= settings.exactBelow),
    ]);
    const search = (keywordLeg: KeywordCandidates) =>
      repo.search({
        collectionId: collection.id,
        dimensions: collection.dimensions,
        vector: vectors[0] as Float32Array,
        terms,
        mode: request.mode,
        candidates,
        topK: fusedK,
        threshold: request.threshold,
        filter,
        exact,
        fusion: settings.fusion,
        rrfK: settings.rrfK,
        weights: {
          dense: request.weights?.dense ?? settings.weights.dense,
          keyword: request.weights?.keyword ?? settings.weights.keyword,
        },
        efSearch: settings.efSearch,
        bm25,
        keyword: keywordLeg,
      });
    let hits = await search(keyword);
    // A replace (or delete) that committed between the two statements took the BM25 leg's
    // candidates with it; in keyword mode nothing else is left, so the leg runs again on the new
    // data rather than answer with nothing. (Hybrid still has its dense leg, read in one snapshot.)
    if (hits.length === 0 && request.mode === 'keyword' && keyword.ids.length > 0) {
      hits = await search(await keywordCandidates());
    }
    const results = hits.map((h): RetrievedChunk => {
      const meta = h.metadata ?? {};
      const title = typeof meta.title === 'string' ? meta.title : h.document_name;
      const path = typeof meta.path === 'string' ? meta.path : `${collection.name}/${h.document_name}`;
      const scores: ScoreBreakdown = { dense: h.similarity };
      if (h.bm25 !== null) scores.keyword = h.bm25;
      if (request.mode === 'hybrid') scores.fused = h.fused;
      return {
        document_id: h.document_id,
        score: scores.dense,
        content: h.content,
        metadata: { ...meta, document_name: h.document_name, chunk_index: h.position, title, path },
        scores,
      };
    });
    return results;
  }

  /** The opt-in rerank stage, after the search (an upstream call: no database session is held). */
  async function rerankResults(
    principal: Principal,
    request: SearchRequest,
    results: RetrievedChunk[],
    signal?: AbortSignal,
  ): Promise<RetrievedChunk[]> {
    if (!request.rerank || results.length === 0) return results;
    if (!rerank) throw new AppError({ code: 'service_unavailable', message: 'Reranking is not configured' });
    const reranked = await rerank(
      principal.keyId,
      {
        model: request.rerank.model,
        query: request.query,
        documents: results.map((r) => r.content),
        topN: request.topK,
      },
      signal,
    );
    return reranked.results.map(({ index, relevanceScore }) => {
      const r = results[index] as RetrievedChunk;
      return { ...r, scores: { ...r.scores, rerank: relevanceScore } };
    });
  }

  return {
    /** Its statements run back to back on the embedded database; ingestion's wait between them. */
    async search(principal: Principal, request: SearchRequest, signal?: AbortSignal): Promise<RetrievedChunk[]> {
      // An unknown rerank model is a 404 before the search: checked only once candidates passed
      // the threshold, a typo answered `[]` whenever none did.
      const model = request.rerank?.model;
      if (model !== undefined && rerankServes !== undefined && !(await rerankServes(model))) {
        throw rerankModelNotFound(model, 'rerank.model');
      }
      const results = await runInteractive(() => searchNow(principal, request, signal));
      return rerankResults(principal, request, results, signal);
    },
  };
}

export type RetrievalService = ReturnType<typeof createRetrievalService>;
