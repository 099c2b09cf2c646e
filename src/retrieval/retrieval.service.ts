import type { CollectionsService } from '../collections/collections.service.ts';
import type { EmbeddingRegistry } from '../embeddings/registry.ts';
import { AppError } from '../http/errors.ts';
import type { Principal } from '../keys/principal.ts';
import { analyze } from './analyzer.ts';
import { compileFilters, type Filters } from './filters.ts';
import type { RetrievalRepository, SearchMode } from './retrieval.repository.ts';

export interface RetrievalSettings {
  /** `score`: weighted sum of each leg's score over its best; `rrf`: reciprocal-rank fusion. */
  fusion: 'score' | 'rrf';
  rrfK: number;
  weights: { dense: number; keyword: number };
  /** BM25 parameters; `termPostings` caps the postings read per query term (0: all). */
  bm25: { k1: number; b: number; termPostings: number };
  /** Filtered searches over at most this many chunks are exact instead of approximate. */
  exactBelow: number;
  efSearch: number;
}

export interface SearchRequest {
  query: string;
  collection: string;
  topK: number;
  threshold: number;
  filters?: Filters | undefined;
  mode: SearchMode;
}

export interface SearchResult {
  document_id: string;
  score: number;
  content: string;
  metadata: Record<string, unknown> & { title: string; path: string };
}

export interface RetrievalDeps {
  repo: RetrievalRepository;
  collections: CollectionsService;
  embeddings: EmbeddingRegistry;
  settings: RetrievalSettings;
}

/** Hybrid retrieval over one collection, shared by rag_search and chatbots. */
export function createRetrievalService({ repo, collections, embeddings, settings }: RetrievalDeps) {
  return {
    async search(principal: Principal, request: SearchRequest, signal?: AbortSignal): Promise<SearchResult[]> {
      const collection = await collections.requireAccessible(principal, request.collection);
      const filter = compileFilters(request.filters);
      const resolved = embeddings.byResolvedName(collection.embeddingProvider, collection.embeddingModelResolved);
      if (!resolved.ok) throw new AppError({ code: 'service_unavailable', message: resolved.message });
      const counts = new Map<string, number>();
      for (const term of analyze(request.query)) counts.set(term, (counts.get(term) ?? 0) + 1);
      const terms = [...counts].map(([term, count]) => ({ term, count }));
      const candidates = Math.max(request.topK * 4, 100);
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
      const [keywordIds, { vectors }, exact] = await Promise.all([
        request.mode === 'dense' ? [] : keywordCandidates(),
        resolved.model.embed([request.query], {
          priority: 'interactive',
          asQuery: true,
          ...(signal ? { signal } : {}),
        }),
        filter !== undefined && repo.countMatching(collection.id, filter).then((n) => n <= settings.exactBelow),
      ]);
      const search = (ids: readonly string[]) =>
        repo.search({
          collectionId: collection.id,
          dimensions: collection.dimensions,
          vector: vectors[0] as Float32Array,
          terms,
          mode: request.mode,
          candidates,
          topK: request.topK,
          threshold: request.threshold,
          filter,
          exact,
          fusion: settings.fusion,
          rrfK: settings.rrfK,
          weights: settings.weights,
          efSearch: Math.max(settings.efSearch, candidates),
          bm25,
          keywordIds: ids,
        });
      let hits = await search(keywordIds);
      // A replace (or delete) that committed between the two statements took the BM25 leg's
      // candidates with it; in keyword mode nothing else is left, so the leg runs again on the new
      // data rather than answer with nothing. (Hybrid still has its dense leg, read in one snapshot.)
      if (hits.length === 0 && request.mode === 'keyword' && keywordIds.length > 0) {
        hits = await search(await keywordCandidates());
      }
      return hits.map((h) => {
        const meta = h.metadata ?? {};
        const title = typeof meta.title === 'string' ? meta.title : h.document_name;
        const path = typeof meta.path === 'string' ? meta.path : `${collection.name}/${h.document_name}`;
        return {
          document_id: h.document_id,
          score: h.similarity,
          content: h.content,
          metadata: { ...meta, document_name: h.document_name, chunk_index: h.position, title, path },
        };
      });
    },
  };
}

export type RetrievalService = ReturnType<typeof createRetrievalService>;
