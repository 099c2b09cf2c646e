-- Hybrid search scores every candidate chunk with its exact BM25: one probe of this key per
-- candidate and query term. Carrying tf and length in the key's index makes each probe index-only
-- instead of a heap visit (1,400 probes: 19 ms -> a few ms at 100k chunks). On a large existing
-- table the rebuild blocks writes to chunk_terms while it runs.
ALTER TABLE "chunk_terms" DROP CONSTRAINT "chunk_terms_collection_id_term_chunk_id_pk";--> statement-breakpoint
ALTER TABLE "chunk_terms" ADD CONSTRAINT "chunk_terms_collection_id_term_chunk_id_pk"
  PRIMARY KEY ("collection_id", "term", "chunk_id") INCLUDE ("tf", "length");
