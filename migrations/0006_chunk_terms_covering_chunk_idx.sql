-- Hybrid search scores every candidate chunk with its exact BM25, reading the candidate's own
-- postings by chunk id. Carrying term, tf and length in that index makes the read index-only (a
-- few contiguous entries per chunk) instead of one heap visit per posting. On a large existing
-- table the rebuild blocks writes to chunk_terms while it runs.
DROP INDEX IF EXISTS "chunk_terms_chunk_idx";--> statement-breakpoint
CREATE INDEX "chunk_terms_chunk_idx" ON "chunk_terms" USING btree ("chunk_id") INCLUDE ("term", "tf", "length");
