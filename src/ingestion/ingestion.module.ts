import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { EmbeddingRegistry } from '../embeddings/registry.ts';
import type { JobsRepository } from './jobs.repository.ts';
import type { Spawner } from '../processes/spawner.ts';
import { probeOcr, type OcrStatus } from './ocr.ts';
import { createIngestionWorker, type IngestionMetrics, type IngestionWorker } from './worker.ts';

export interface IngestionModuleDeps {
  jobs: JobsRepository;
  /** Local and upstream models, as every domain of the process embeds through them. */
  embeddings: EmbeddingRegistry;
  metrics: IngestionMetrics;
  config: Config;
  logger: Logger;
  /** Jobs processed at once in this process; 0: none (another process runs `npm run worker`). */
  concurrency: number;
  /** Forks the parser processes; absent: the parse pool starts its own. */
  spawner?: Spawner;
}

export interface IngestionModule {
  /** The worker claiming jobs, when this process ingests. Uploads are the documents domain's. */
  service: IngestionWorker | undefined;
  /** Whether OCR is on here, and why (start-up log, /readyz). */
  ocr: OcrStatus;
}

/** The OCR probe and the worker that processes queued documents. */
export async function createIngestionModule(deps: IngestionModuleDeps): Promise<IngestionModule> {
  const { config, logger, concurrency } = deps;
  // OCR of scanned PDF pages is on when Tesseract is installed; said at start-up and on /readyz.
  const ocr = await probeOcr(config.parsing.ocr, config.parsing.memoryMb);
  if (concurrency === 0) return { service: undefined, ocr };
  (ocr.ok ? logger.info : logger.warn).call(logger, `ocr: ${ocr.detail}`);
  const service = createIngestionWorker({
    jobs: deps.jobs,
    embeddings: deps.embeddings,
    chunking: config.chunking,
    parsing: config.parsing,
    leaseMs: config.ingestionLeaseMs,
    embedBatch: config.ingestionEmbedBatch,
    maxChars: config.maxDocumentChars,
    ocr: ocr.settings,
    logger,
    concurrency,
    metrics: deps.metrics,
    spawner: deps.spawner,
  });
  return { service, ocr };
}
