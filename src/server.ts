import { DISK_FULL_CODE } from './db/disk-guard.ts';
import { buildApp } from './app.ts';
import { openapiDocument } from './http/openapi.ts';
import { ConfigError, loadConfig } from './config.ts';
import { migrationsFolder, openConfiguredDatabase } from './db/client.ts';
import { DatabaseFromNewerReleaseError, knownMigrations, migrationsLine } from './db/migrations.ts';
import { DataDirLockedError } from './db/data-dir-lock.ts';
import { loadEmbeddings } from './embeddings/load.ts';
import { createLogger } from './logging.ts';
import { startMetricsServer } from './http/metrics-server.ts';
import { createSpawner } from './processes/spawner.ts';
import { createLimiter } from './ratelimit/create.ts';
import { startupSummary } from './startup-summary.ts';

/** After the deadline, how long streams get to write their error event before sockets are cut. */
const STREAM_END_GRACE_MS = 250;

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  // Before the database and the model make this process large (see processes/spawner.ts).
  const spawner = createSpawner({ logger });
  // An embedded engine that failed below SQL is not used again: readiness fails at once, and the
  // process shuts down with status 1 so that its supervisor starts it afresh.
  const onBroken: { stop: (reason: string) => unknown } = { stop: () => undefined };
  const database = await openConfiguredDatabase(config, logger, (error) => {
    logger.fatal({ err: error }, 'embedded database failed; shutting down so a restart reopens it');
    void onBroken.stop('database failure');
  });
  logger.info(migrationsLine(await database.migrate(), knownMigrations(migrationsFolder)));
  const limiter = await createLimiter({ redisUrl: config.redisUrl, redisFailureMode: config.redisFailureMode, logger });
  const embeddings = await loadEmbeddings(config, logger);
  const app = await buildApp({ config, database, limiter, logger, embeddings, spawner });
  for (const line of startupSummary({
    config,
    database: database.kind,
    embeddings,
    tools: await app.toolStates(),
  })) {
    logger.info(line);
  }
  // Built before traffic: the first build takes ~100 ms of the event loop.
  openapiDocument(app.server);
  // Fastify logs one line per local address; one line, ours, says where ragport listens.
  const fastifyLevel = app.server.log.level;
  app.server.log.level = 'warn';
  try {
    await app.listen({ port: config.port, host: config.host });
  } finally {
    app.server.log.level = fastifyLevel;
  }
  const { token, port: metricsPort } = config.metrics;
  const metricsServer =
    metricsPort !== undefined
      ? await startMetricsServer({ host: config.host, port: metricsPort, token, metrics: app.metrics, logger })
      : undefined;
  const address = app.server.server.address();
  const port = address !== null && typeof address === 'object' ? address.port : config.port;
  logger.info(
    { port, metrics_port: metricsServer?.port, database: database.kind, rate_limits: limiter.name },
    `ragport listening on http://${config.host}:${port}`,
  );

  let stopping = false;
  let exitCode = 0;
  const stop = async (signal: string) => {
    if (stopping) {
      logger.info({ signal }, 'already shutting down');
      return;
    }
    stopping = true;
    logger.info({ signal, timeout_ms: config.shutdownTimeoutMs }, 'shutting down');
    app.beginShutdown();
    // Past the deadline open streams end in-band, then every connection is cut; the rest of the
    // shutdown (usage flush, jobs returned, connections closed) still runs.
    const deadline = setTimeout(() => {
      logger.warn('shutdown deadline passed; ending open streams and connections');
      app.endStreams();
      setTimeout(() => app.server.server.closeAllConnections(), STREAM_END_GRACE_MS).unref();
    }, config.shutdownTimeoutMs);
    deadline.unref();
    const hardStop = setTimeout(() => {
      logger.error('shutdown is stuck; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs + 10_000);
    hardStop.unref();
    // Stops accepting at once, waits for in-flight requests, then runs the onClose hooks
    // (usage flushed, providers closed, the in-process worker's jobs returned to the queue).
    await app.server.close();
    clearTimeout(deadline);
    // Its threads end once the batches they run have returned: exiting during one aborts the process.
    await embeddings.close();
    await metricsServer?.close();
    await limiter.close();
    await spawner.close();
    await database.close();
    logger.info('stopped');
    process.exit(exitCode);
  };
  onBroken.stop = (reason) => {
    exitCode = 1;
    return stop(reason);
  };
  // Every time, not once: a second signal (a supervisor that repeats it, launch.mjs once npm is
  // gone, Ctrl-C twice) would otherwise kill the process mid-shutdown. SIGHUP (the terminal
  // closed) shuts down the same way.
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => void stop(signal));
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
  } else if (
    error instanceof DataDirLockedError ||
    error instanceof DatabaseFromNewerReleaseError ||
    (error instanceof Error && (error as { code?: unknown }).code === DISK_FULL_CODE)
  ) {
    process.stderr.write(`ragport failed to start: ${error.message}\n`);
  } else {
    process.stderr.write(
      `ragport failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
  }
  process.exit(1);
});
