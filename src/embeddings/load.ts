import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { EmbeddingModel } from './embeddings.types.ts';
import { loadLocalModel } from './local.model.ts';
import { createEmbeddingRegistry, type EmbeddingRegistry } from './registry.ts';

/**
 * Loads the local embedding model at start-up. A model that cannot be loaded is reported once,
 * clearly, and stays unavailable (requests naming it get a 503): never silent garbage vectors.
 */
export async function loadEmbeddings(
  config: Config,
  logger: Logger,
  upstream?: (name: string) => EmbeddingModel | undefined,
): Promise<EmbeddingRegistry> {
  const local = new Map<string, EmbeddingModel | Error>();
  try {
    const model = await loadLocalModel({
      id: config.embeddingModel,
      modelsDir: config.modelsDir,
      cacheDir: path.join(config.dataDir, 'models'),
      dtype: config.embeddingDtype,
      ...(config.embeddingThreads ? { threads: config.embeddingThreads } : {}),
    });
    local.set(config.embeddingModel, model);
    logger.info(
      { model: model.name, dimensions: model.dimensions, dtype: config.embeddingDtype },
      'embedding model loaded',
    );
  } catch (error) {
    local.set(config.embeddingModel, error as Error);
    logger.error({ model: config.embeddingModel, err: error }, 'embedding model unavailable');
  }
  return createEmbeddingRegistry({ local, defaultLocal: config.embeddingModel, ...(upstream ? { upstream } : {}) });
}
