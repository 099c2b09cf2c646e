import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Db } from '../db/client.ts';
import type { EmbeddingRegistry } from '../embeddings/registry.ts';
import { countEmbeddings } from '../metrics/embeddings.ts';
import { createMetrics, type Metrics } from '../metrics/metrics.ts';
import { createJobsRepository } from './jobs.repository.ts';
import { probeOcr, type OcrStatus } from './ocr.ts';
import { createIngestionWorker, type IngestionWorker } from './worker.ts';

export interface IngestionModuleDeps {
  db: Db;
  /** The loaded models; the module hands out the same registry counting what it embeds. */
  embeddings: EmbeddingRegistry;
  config: Config;
  logger: Logger;
  /** Jobs processed at once in this process; 0: none (another process runs `npm run worker`). */
  concurrency: number;
}

export interface IngestionModule {
  /** The worker claiming jobs, when this process ingests. */
  service: IngestionWorker | undefined;
  /** This process's Prometheus registry: the queue is read at each scrape, jobs and embeddings counted. */
  metrics: Metrics;
  /** The embedding registry, counted by `metrics`; every domain of the process embeds through it. */
  embeddings: EmbeddingRegistry;
  /** Whether OCR is on here, and why (start-up log, /readyz). */
  ocr: OcrStatus;
}

/**
 * The ingestion side of a process, wired once for the server (INGESTION_CONCURRENCY > 0: an
 * in-process worker) and for `npm run worker` alike: the queue, the process's metrics (which read
 * that queue), the OCR probe and the worker. Uploads are the documents domain's; this only
 * processes them.
 */
export async function createIngestionModule(deps: IngestionModuleDeps): Promise<IngestionModule> {
  const { config, logger, concurrency } = deps;
  const jobs = createJobsRepository(deps.db);
  const metrics = createMetrics({
    processMetrics: config.metrics.token !== undefined,
    queueStats: () => jobs.queueStats(),
    onQueueError: (error) => logger.warn({ err: error }, 'metrics: ingestion queue unreadable'),
  });
  const embeddings = countEmbeddings(deps.embeddings, metrics);
  // OCR of scanned PDF pages is on when Tesseract is installed; said at start-up and on /readyz.
  const ocr = await probeOcr(config.parsing.ocr, config.parsing.memoryMb);
  if (concurrency === 0) return { service: undefined, metrics, embeddings, ocr };
  (ocr.ok ? logger.info : logger.warn).call(logger, `ocr: ${ocr.detail}`);
  const service = createIngestionWorker({
    jobs,
    embeddings,
    chunking: config.chunking,
    parsing: config.parsing,
    leaseMs: config.ingestionLeaseMs,
    embedBatch: config.ingestionEmbedBatch,
    ocr: ocr.settings,
    logger,
    concurrency,
    metrics: metrics.ingestion,
  });
  return { service, metrics, embeddings, ocr };
}
