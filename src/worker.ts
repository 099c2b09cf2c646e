import { loadConfig, ConfigError } from './config.ts';
import { openConfiguredDatabase } from './db/client.ts';
import { loadEmbeddings } from './embeddings/load.ts';
import { createGateway } from './gateway/gateway.ts';
import { createJobsRepository } from './ingestion/jobs.repository.ts';
import { probeOcr } from './ingestion/ocr.ts';
import { createIngestionWorker } from './ingestion/worker.ts';
import { createLogger } from './logging.ts';
import { countEmbeddings } from './metrics/embeddings.ts';
import { createMetrics } from './metrics/metrics.ts';
import { startMetricsServer } from './http/metrics-server.ts';
import { startWebhookSender } from './webhooks/sender.ts';
import { createTokenQuota } from './usage/quota.ts';
import { createBatchedUsageRecorder } from './usage/usage.recorder.ts';
import { createUsageRepository } from './usage/usage.repository.ts';
import { createSealer } from './webhooks/signing.ts';
import { createWebhooksRepository } from './webhooks/webhooks.repository.ts';

/** A standalone ingestion worker (`npm run worker`): claims jobs from the shared queue, serves no API. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  if (config.databaseUrl === undefined) {
    throw new ConfigError('npm run worker needs DATABASE_URL: the embedded database admits only the server process');
  }
  const database = await openConfiguredDatabase(config, logger);
  await database.migrate();
  const jobs = createJobsRepository(database.db);
  const { token, port } = config.metrics;
  const metrics = createMetrics({
    processMetrics: token !== undefined,
    queueStats: () => jobs.queueStats(),
    onQueueError: (error) => logger.warn({ err: error }, 'metrics: ingestion queue unreadable'),
  });
  // Collections on an upstream embedding model embed through the gateway's providers; the tokens
  // count against the uploading key, as in the server.
  const usageRepo = createUsageRepository(database.db);
  const usage = createBatchedUsageRecorder({
    repo: usageRepo,
    clock: Date.now,
    logger,
    flushIntervalMs: config.usageFlushIntervalMs,
    maxPendingRows: config.usageFlushMaxRows,
  });
  const quota = createTokenQuota({ repo: usageRepo, recorder: usage, clock: Date.now, ttlMs: 5_000 });
  const gateway = createGateway({ config: config.gateway, usage, quota, logger, clock: Date.now });
  const local = await loadEmbeddings(config, logger);
  const embeddings = countEmbeddings(local.withUpstream(gateway.embeddingModels), metrics);
  const ocr = await probeOcr(config.parsing.ocr, config.parsing.memoryMb);
  (ocr.ok ? logger.info : logger.warn).call(logger, `ocr: ${ocr.detail}`);
  const worker = createIngestionWorker({
    jobs,
    embeddings,
    chunking: config.chunking,
    parsing: config.parsing,
    leaseMs: config.ingestionLeaseMs,
    embedBatch: config.ingestionEmbedBatch,
    ocr: ocr.settings,
    logger,
    concurrency: Math.max(1, config.ingestionConcurrency),
    metrics: metrics.ingestion,
  });
  // The worker's only HTTP: /healthz (and /metrics with a token) on METRICS_PORT, when set.
  const metricsServer =
    port !== undefined ? await startMetricsServer({ host: config.host, port, token, metrics, logger }) : undefined;
  worker.start();
  const sender = startWebhookSender({
    repo: createWebhooksRepository(database.db),
    sealer: config.webhooks.signingKey === undefined ? undefined : createSealer(config.webhooks.signingKey),
    config: config.webhooks,
    logger,
  });
  logger.info({ worker: worker.id, metrics_port: metricsServer?.port }, 'ingestion worker started');

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, timeout_ms: config.shutdownTimeoutMs }, 'worker stopping');
    // A job stuck past the deadline (a parser that cannot be interrupted) is left to its lease.
    const deadline = setTimeout(() => {
      logger.error('shutdown deadline passed; exiting with jobs still running (their leases will expire)');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    deadline.unref();
    await worker.stop();
    await sender.stop();
    await usage.close();
    await gateway.close();
    await metricsServer?.close();
    await database.close();
    logger.info('worker stopped');
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((error: unknown) => {
  process.stderr.write(`ragport worker failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
