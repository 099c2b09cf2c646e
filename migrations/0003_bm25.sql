CREATE TABLE "chunk_terms" (
	"collection_id" text NOT NULL,
	"term" text NOT NULL,
	"chunk_id" bigint NOT NULL,
	"tf" integer NOT NULL,
	"length" integer NOT NULL,
	CONSTRAINT "chunk_terms_collection_id_term_chunk_id_pk" PRIMARY KEY("collection_id","term","chunk_id")
);
--> statement-breakpoint
CREATE TABLE "collection_stats" (
	"collection_id" text PRIMARY KEY NOT NULL,
	"chunk_count" bigint DEFAULT 0 NOT NULL,
	"total_terms" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
ALTER TABLE "chunks" ADD COLUMN "term_count" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "chunk_terms" ADD CONSTRAINT "chunk_terms_collection_id_collections_id_fk" FOREIGN KEY ("collection_id") REFERENCES "public"."collections"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "chunk_terms" ADD CONSTRAINT "chunk_terms_chunk_id_chunks_id_fk" FOREIGN KEY ("chunk_id") REFERENCES "public"."chunks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "collection_stats" ADD CONSTRAINT "collection_stats_collection_id_collections_id_fk" FOREIGN KEY ("collection_id") REFERENCES "public"."collections"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "chunk_terms_chunk_idx" ON "chunk_terms" USING btree ("chunk_id");