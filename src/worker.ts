import { loadConfig, ConfigError } from './config.ts';
import { openConfiguredDatabase } from './db/client.ts';
import { loadEmbeddings } from './embeddings/load.ts';
import { createJobsRepository } from './ingestion/jobs.repository.ts';
import { createIngestionWorker } from './ingestion/worker.ts';
import { createLogger } from './logging.ts';

/** A standalone ingestion worker (`npm run worker`): claims jobs from the shared queue, serves no HTTP. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  if (config.databaseUrl === undefined) {
    throw new ConfigError('npm run worker needs DATABASE_URL: the embedded database admits only the server process');
  }
  const database = await openConfiguredDatabase(config, logger);
  await database.migrate();
  const embeddings = await loadEmbeddings(config, logger);
  const worker = createIngestionWorker({
    jobs: createJobsRepository(database.db),
    embeddings,
    chunking: config.chunking,
    parsing: config.parsing,
    leaseMs: config.ingestionLeaseMs,
    logger,
    concurrency: Math.max(1, config.ingestionConcurrency),
  });
  worker.start();
  logger.info({ worker: worker.id }, 'ingestion worker started');

  const stop = async (signal: string) => {
    logger.info({ signal }, 'worker stopping');
    await worker.stop();
    await database.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((error: unknown) => {
  process.stderr.write(`ragport worker failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
