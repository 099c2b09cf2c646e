-- Webhook deliveries are written by triggers, in the transaction that changes the document or
-- collection: whichever code path (API, in-process or standalone worker) made the change, the
-- event exists exactly when the change committed. One row per endpoint whose key may see the
-- collection (not revoked, not expired, `webhooks` or `admin` scope, collection restriction) and
-- whose filters match. The workers send them (src/webhooks/sender.ts).
CREATE FUNCTION ragport_enqueue_webhooks(p_event text, p_collection text, p_data jsonb) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO webhook_deliveries (id, endpoint_id, event, payload)
  SELECT 'evt_' || replace(gen_random_uuid()::text, '-', ''), e.id, p_event,
         jsonb_build_object('type', p_event, 'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'data', p_data)
  FROM webhook_endpoints e
  LEFT JOIN api_keys k ON k.id = e.key_id
  WHERE p_event = ANY (e.events)
    AND (e.collection_name IS NULL OR e.collection_name = p_collection)
    AND (e.key_id IS NULL OR (
          k.revoked_at IS NULL
          AND (k.expires_at IS NULL OR k.expires_at > now())
          AND (k.scopes && ARRAY['webhooks', 'admin'])
          AND (k.collections IS NULL OR p_collection = ANY (k.collections))));
$$;
--> statement-breakpoint
CREATE FUNCTION ragport_document_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  coll text;
BEGIN
  IF TG_OP = 'DELETE' THEN
    -- Deleted with its collection: the collection row is gone, and collection.deleted says it all.
    SELECT name INTO coll FROM collections WHERE id = OLD.collection_id;
    IF coll IS NOT NULL THEN
      PERFORM ragport_enqueue_webhooks('document.deleted', coll,
        jsonb_build_object('document_id', OLD.id, 'collection', coll, 'name', OLD.name));
    END IF;
    RETURN OLD;
  END IF;
  SELECT name INTO coll FROM collections WHERE id = NEW.collection_id;
  PERFORM ragport_enqueue_webhooks('document.' || NEW.status, coll,
    jsonb_build_object('document_id', NEW.id, 'collection', coll, 'name', NEW.name, 'status', NEW.status,
                       'error', NEW.error, 'version', NEW.version, 'chunk_count', NEW.chunk_count));
  RETURN NEW;
END
$$;
--> statement-breakpoint
CREATE TRIGGER documents_webhooks
  AFTER UPDATE OF status, processed_at ON documents
  FOR EACH ROW
  WHEN (NEW.status IN ('processed', 'failed')
        AND (OLD.status IS DISTINCT FROM NEW.status OR OLD.processed_at IS DISTINCT FROM NEW.processed_at))
  EXECUTE FUNCTION ragport_document_webhooks();
--> statement-breakpoint
CREATE TRIGGER documents_deleted_webhooks
  AFTER DELETE ON documents
  FOR EACH ROW
  EXECUTE FUNCTION ragport_document_webhooks();
--> statement-breakpoint
CREATE FUNCTION ragport_collection_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM ragport_enqueue_webhooks('collection.deleted', OLD.name,
    jsonb_build_object('collection', OLD.name, 'collection_id', OLD.id));
  RETURN OLD;
END
$$;
--> statement-breakpoint
CREATE TRIGGER collections_deleted_webhooks
  AFTER DELETE ON collections
  FOR EACH ROW
  EXECUTE FUNCTION ragport_collection_webhooks();
