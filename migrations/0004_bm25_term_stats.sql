CREATE TABLE "term_stats" (
	"collection_id" text NOT NULL,
	"term" text NOT NULL,
	"df" integer NOT NULL,
	CONSTRAINT "term_stats_collection_id_term_pk" PRIMARY KEY("collection_id","term")
);
--> statement-breakpoint
ALTER TABLE "term_stats" ADD CONSTRAINT "term_stats_collection_id_collections_id_fk" FOREIGN KEY ("collection_id") REFERENCES "public"."collections"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
INSERT INTO "term_stats" ("collection_id", "term", "df")
SELECT "collection_id", "term", count(*)::int FROM "chunk_terms" GROUP BY "collection_id", "term";
--> statement-breakpoint
-- Impact-ordered postings: each term's list read best first (BM25's term-frequency part with
-- k1 = 0.9, b = 0.4 and a nominal chunk length of 100 terms), covering, so the top of a long list
-- is an index-only scan. src/retrieval/retrieval.repository.ts repeats this expression exactly.
CREATE INDEX "chunk_terms_impact_idx" ON "chunk_terms" USING btree (
  "collection_id", "term",
  ("tf"::float8 / ("tf"::float8 + 0.54::float8 + 0.0036::float8 * "length"::float8)) DESC
) INCLUDE ("chunk_id", "tf", "length");
