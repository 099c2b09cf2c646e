import { buildApp } from './app.ts';
import { ConfigError, loadConfig } from './config.ts';
import { openConfiguredDatabase } from './db/client.ts';
import { loadEmbeddings } from './embeddings/load.ts';
import { createLogger } from './logging.ts';
import { createLimiter } from './ratelimit/create.ts';

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  const database = await openConfiguredDatabase(config, logger);
  await database.migrate();
  const limiter = await createLimiter({ redisUrl: config.redisUrl, redisFailureMode: config.redisFailureMode, logger });
  const embeddings = await loadEmbeddings(config, logger);
  const app = await buildApp({ config, database, limiter, logger, embeddings });
  await app.server.listen({ port: config.port, host: config.host });
  logger.info(
    { port: config.port, database: database.kind, rate_limits: limiter.name },
    `ragport listening on ${config.host}:${config.port}`,
  );

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    app.beginShutdown();
    const deadline = setTimeout(() => {
      logger.error('shutdown deadline passed; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    deadline.unref();
    await app.server.close();
    await limiter.close();
    await database.close();
    logger.info('stopped');
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
  } else {
    process.stderr.write(
      `ragport failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
  }
  process.exit(1);
});
