import { loadConfig, ConfigError } from './config.ts';
import { migrationsFolder, openConfiguredDatabase } from './db/client.ts';
import { knownMigrations, migrationsLine } from './db/migrations.ts';
import { loadEmbeddings } from './embeddings/load.ts';
import { createLogger } from './logging.ts';
import { startMetricsServer } from './http/metrics-server.ts';
import { createProcessing } from './modules.ts';
import { createSpawner } from './processes/spawner.ts';

/** A standalone ingestion worker (`npm run worker`): claims jobs from the shared queue, serves no API. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  if (config.databaseUrl === undefined) {
    throw new ConfigError('npm run worker needs DATABASE_URL: the embedded database admits only the server process');
  }
  // Before the database and the model make this process large (see processes/spawner.ts).
  const spawner = createSpawner({ logger });
  const database = await openConfiguredDatabase(config, logger);
  logger.info(migrationsLine(await database.migrate(), knownMigrations(migrationsFolder)));
  const embeddings = await loadEmbeddings(config, logger);
  const processing = await createProcessing({
    db: database.db,
    embeddings,
    config,
    logger,
    clock: Date.now,
    concurrency: Math.max(1, config.ingestionConcurrency),
    spawner,
  });
  const { metrics } = processing;
  const { token, port } = config.metrics;
  // The worker's only HTTP: /healthz (and /metrics with a token) on METRICS_PORT, when set.
  const metricsServer =
    port !== undefined ? await startMetricsServer({ host: config.host, port, token, metrics, logger }) : undefined;
  processing.start();
  logger.info(
    { worker: processing.ingestion.service?.id, metrics_port: metricsServer?.port },
    'ingestion worker started',
  );

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      logger.info({ signal }, 'already stopping');
      return;
    }
    stopping = true;
    logger.info({ signal, timeout_ms: config.shutdownTimeoutMs }, 'worker stopping');
    // A job stuck past the deadline (a parser that cannot be interrupted) is left to its lease.
    const deadline = setTimeout(() => {
      logger.error('shutdown deadline passed; exiting with jobs still running (their leases will expire)');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    deadline.unref();
    await processing.stop();
    // Its threads end once the batches they run have returned: exiting during one aborts the process.
    await embeddings.close();
    await processing.close();
    await spawner.close();
    await metricsServer?.close();
    await database.close();
    logger.info('worker stopped');
    process.exit(0);
  };
  // Every time, not once: a second signal would otherwise kill the worker mid-shutdown (server.ts).
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => void stop(signal));
}

main().catch((error: unknown) => {
  process.stderr.write(`ragport worker failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
