-- A chunk of real text (about 1 kB) plus its 384-dimensional vector (1.5 kB) passes the 2 kB
-- TOAST threshold, and pgvector's `external` storage then moved the vector out of line: every
-- distance computed from the heap (the similarity of each candidate, exact search) paid a TOAST
-- lookup. MAIN keeps the vector in the row and moves the text out of line first. Rows written
-- before this migration keep their layout until they are rewritten (re-ingestion, VACUUM FULL).
ALTER TABLE "chunks" ALTER COLUMN "embedding" SET STORAGE MAIN;
