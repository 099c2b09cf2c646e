import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { messageWithCauses } from '../logging.ts';
import type { EmbeddingModel } from './embeddings.types.ts';
import { loadLocalModel } from './local.model.ts';
import { createEmbeddingRegistry, type EmbeddingRegistry } from './registry.ts';

/** Retries of a model that could not be loaded: soon at first (it is being copied in), then rarely. */
const FIRST_RETRY_MS = 2_000;
const MAX_RETRY_MS = 60_000;

/** Where the embedding model came from, for the start-up summary. */
export function modelSource(config: Pick<Config, 'modelsDir' | 'dataDir'>): string {
  return config.modelsDir !== undefined
    ? `MODELS_DIR ${path.resolve(config.modelsDir)}`
    : `the model hub (cached in ${path.resolve(config.dataDir, 'models')})`;
}

/**
 * The files the model needs under MODELS_DIR that are not there. Checked before transformers.js
 * looks, whose own message for a missing file is a TypeError deep inside it, and which keeps
 * what it failed to find, so a retry after the files appear would fail again.
 */
function missingFiles(config: Config): string | undefined {
  if (config.modelsDir === undefined) return undefined;
  const dir = path.resolve(config.modelsDir, config.embeddingModel);
  const weights = config.embeddingDtype === 'q8' ? 'onnx/model_quantized.onnx' : 'onnx/model.onnx';
  const missing = ['config.json', 'tokenizer.json', weights].filter((f) => !existsSync(path.join(dir, f)));
  return missing.length === 0 ? undefined : `no ${missing.join(', ')} in ${dir}`;
}

/** What is wrong and exactly how to fix it: shown in the log, on /readyz and in the 503s. */
function guidance(config: Config, error: unknown): string {
  const where =
    config.modelsDir === undefined
      ? 'MODELS_DIR is not set and the model hub could not be reached'
      : `MODELS_DIR (${path.resolve(config.modelsDir)}) does not hold it`;
  return (
    `not loaded (${where}: ${messageWithCauses((error as Error).cause ?? error)}). ` +
    `Provide it offline: set MODELS_DIR to a directory holding ${config.embeddingModel}/ ` +
    '(`bash .ci/fetch-model.sh` builds one and prints that directory), or let the server reach the model hub. ' +
    'Loading is retried until it succeeds.'
  );
}

/**
 * Loads the local embedding model at start-up. A model that cannot be loaded is reported clearly
 * with what to do, stays unavailable (requests naming it get a 503, /readyz is 503: collections
 * cannot work), and is retried in the background, so that it is used as soon as it appears. Never
 * silent garbage vectors.
 */
export async function loadEmbeddings(config: Config, logger: Logger): Promise<EmbeddingRegistry> {
  const local = new Map<string, EmbeddingModel | Error>();
  const attempt = async (): Promise<boolean> => {
    try {
      const missing = missingFiles(config);
      if (missing !== undefined) throw new Error(missing);
      const model = await loadLocalModel({
        id: config.embeddingModel,
        modelsDir: config.modelsDir,
        cacheDir: path.join(config.dataDir, 'models'),
        dtype: config.embeddingDtype,
        ...(config.embeddingThreads ? { threads: config.embeddingThreads } : {}),
      });
      local.set(config.embeddingModel, model);
      logger.info(
        { model: model.name, dimensions: model.dimensions, dtype: config.embeddingDtype, source: modelSource(config) },
        'embedding model loaded',
      );
      return true;
    } catch (error) {
      const message = guidance(config, error);
      const known = local.get(config.embeddingModel);
      if (!(known instanceof Error) || known.message !== message) {
        logger.error({ model: config.embeddingModel }, `embedding model ${config.embeddingModel} ${message}`);
      }
      local.set(config.embeddingModel, new Error(message));
      return false;
    }
  };
  if (!(await attempt())) {
    let delay = FIRST_RETRY_MS;
    const retry = () => {
      const timer = setTimeout(() => {
        void attempt().then((loaded) => {
          if (!loaded) retry();
        });
      }, delay);
      timer.unref();
      delay = Math.min(delay * 2, MAX_RETRY_MS);
    };
    retry();
  }
  return createEmbeddingRegistry({ local, defaultLocal: config.embeddingModel });
}
