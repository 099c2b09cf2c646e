CREATE TABLE "chunk_staging" (
	"document_id" text PRIMARY KEY NOT NULL,
	"collection_id" text NOT NULL,
	"first_chunk_id" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "chunk_staging" ADD CONSTRAINT "chunk_staging_document_id_documents_id_fk" FOREIGN KEY ("document_id") REFERENCES "public"."documents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "chunk_staging" ADD CONSTRAINT "chunk_staging_collection_id_collections_id_fk" FOREIGN KEY ("collection_id") REFERENCES "public"."collections"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "chunk_staging_collection_idx" ON "chunk_staging" USING btree ("collection_id");