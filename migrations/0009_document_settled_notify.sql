-- Wait until searchable (docs/ingestion.md): every transaction that settles a document
-- (processed, failed, cancelled) or deletes it announces the document id on the channel
-- ragport_documents. NOTIFY is delivered at commit, to every listening instance, and on PGlite
-- in process: one notification path whichever code path made the change.
CREATE FUNCTION ragport_notify_document_settled() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM pg_notify('ragport_documents', OLD.id);
    RETURN OLD;
  END IF;
  PERFORM pg_notify('ragport_documents', NEW.id);
  RETURN NEW;
END
$$;
--> statement-breakpoint
CREATE TRIGGER documents_settled_notify
  AFTER UPDATE OF status, processed_at ON documents
  FOR EACH ROW
  WHEN (NEW.status IN ('processed', 'failed', 'cancelled')
        AND (OLD.status IS DISTINCT FROM NEW.status OR OLD.processed_at IS DISTINCT FROM NEW.processed_at))
  EXECUTE FUNCTION ragport_notify_document_settled();
--> statement-breakpoint
CREATE TRIGGER documents_deleted_notify
  AFTER DELETE ON documents
  FOR EACH ROW
  EXECUTE FUNCTION ragport_notify_document_settled();
