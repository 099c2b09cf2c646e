import { loadConfig } from '../../src/config.ts';
import { loadEmbeddings } from '../../src/embeddings/load.ts';
import type { EmbeddingRegistry } from '../../src/embeddings/registry.ts';
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
