-- Postings keep no foreign key to their collection: they go with their chunk (chunk_id's cascade),
-- and a cascade from the collection's row walked the collection's whole range of the primary key,
-- dead entries included, when the purger deleted that row last (~170 ms of the embedded database
-- at 650,000 postings).
-- chunk_retired: a replaced version of a document being removed in slices (src/retrieval/index.repository.ts).
CREATE TABLE "chunk_retired" (
	"document_id" text PRIMARY KEY NOT NULL,
	"collection_id" text NOT NULL,
	"below_chunk_id" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "chunk_terms" DROP CONSTRAINT "chunk_terms_collection_id_collections_id_fk";
--> statement-breakpoint
DROP INDEX "collections_name_idx";--> statement-breakpoint
ALTER TABLE "collections" ADD COLUMN "deleted_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "chunk_retired" ADD CONSTRAINT "chunk_retired_document_id_documents_id_fk" FOREIGN KEY ("document_id") REFERENCES "public"."documents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "chunk_retired" ADD CONSTRAINT "chunk_retired_collection_id_collections_id_fk" FOREIGN KEY ("collection_id") REFERENCES "public"."collections"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "chunk_retired_collection_idx" ON "chunk_retired" USING btree ("collection_id");--> statement-breakpoint
CREATE UNIQUE INDEX "collections_name_idx" ON "collections" USING btree ("name") WHERE "collections"."deleted_at" is null;--> statement-breakpoint
-- Deleting a collection marks it (deleted_at) in one short transaction; its rows are removed
-- afterwards in short ones (src/collections/purge.ts). collection.deleted is sent when it is
-- marked, not again when the purger deletes its row; the documents of a deleted collection send
-- no events (a job finishing meanwhile, or the purger deleting them): collection.deleted says it all.
CREATE OR REPLACE FUNCTION ragport_document_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  coll text;
BEGIN
  IF TG_OP = 'DELETE' THEN
    SELECT name INTO coll FROM collections WHERE id = OLD.collection_id AND deleted_at IS NULL;
    IF coll IS NOT NULL THEN
      PERFORM ragport_enqueue_webhooks('document.deleted', coll,
        jsonb_build_object('document_id', OLD.id, 'collection', coll, 'name', OLD.name));
    END IF;
    RETURN OLD;
  END IF;
  SELECT name INTO coll FROM collections WHERE id = NEW.collection_id AND deleted_at IS NULL;
  IF coll IS NOT NULL THEN
    PERFORM ragport_enqueue_webhooks('document.' || NEW.status, coll,
      jsonb_build_object('document_id', NEW.id, 'collection', coll, 'name', NEW.name, 'status', NEW.status,
                         'error', NEW.error, 'version', NEW.version, 'chunk_count', NEW.chunk_count));
  END IF;
  RETURN NEW;
END
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION ragport_collection_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- The purger's delete of a collection already announced when it was marked.
  IF TG_OP = 'DELETE' AND OLD.deleted_at IS NOT NULL THEN
    RETURN OLD;
  END IF;
  PERFORM ragport_enqueue_webhooks('collection.deleted', OLD.name,
    jsonb_build_object('collection', OLD.name, 'collection_id', OLD.id));
  RETURN OLD;
END
$$;
--> statement-breakpoint
CREATE TRIGGER collections_marked_deleted_webhooks
  AFTER UPDATE OF deleted_at ON collections
  FOR EACH ROW
  WHEN (OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL)
  EXECUTE FUNCTION ragport_collection_webhooks();
