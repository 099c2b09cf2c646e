import { loadConfig } from '../../src/config.ts';
import { loadEmbeddings } from '../../src/embeddings/load.ts';
import type { CollectionModel, EmbeddingRegistry } from '../../src/embeddings/registry.ts';
import type { EmbeddedChunk } from '../../src/ingestion/jobs.repository.ts';
import { termFrequencies } from '../../src/retrieval/analyzer.ts';
import { createLogger } from '../../src/logging.ts';

let registry: Promise<EmbeddingRegistry> | undefined;

/**
 * The real local model, loaded once per test process from MODELS_DIR (`.ci/fetch-model.sh`
 * prepares it). Without it the registry reports the model unavailable and tests that embed fail
 * saying so; nothing ever falls back to fake vectors.
 */
export function testEmbeddings(): Promise<EmbeddingRegistry> {
  registry ??= loadEmbeddings(loadConfig(process.env), createLogger('silent'));
  return registry;
}

/**
 * Texts as the ingestion worker commits them: one chunk each, embedded by the real model the
 * collection records (bulk priority), with their BM25 terms.
 */
export async function embeddedChunks(
  collection: CollectionModel,
  texts: string[],
  tokenCount: number,
): Promise<EmbeddedChunk[]> {
  const resolved = await (await testEmbeddings()).forCollection(collection);
  if (!resolved.ok) throw new Error(resolved.message);
  const { vectors } = await resolved.model.embed(texts, { priority: 'bulk' });
  return texts.map((content, position) => {
    const { tf, length } = termFrequencies(content);
    return {
      position,
      startChar: 0,
      endChar: content.length,
      tokenCount,
      content,
      embedding: vectors[position] as Float32Array,
      terms: tf,
      termCount: length,
    };
  });
}
