-- pgvector stores and indexes the embeddings; every later migration relies on it.
CREATE EXTENSION IF NOT EXISTS vector;
