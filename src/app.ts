import { readFileSync } from 'node:fs';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { Database } from './db/client.ts';
import { startEmbeddedMaintenance } from './db/maintenance.ts';
import { randomBase62 } from './db/ids.ts';
import type { Gateway } from './gateway/gateway.module.ts';
import { backupRoutes } from './backup/backup.routes.ts';
import { createBackupService } from './backup/backup.service.ts';
import { healthRoutes } from './health/health.routes.ts';
import { listenWithAcceptors } from './http/acceptors.ts';
import { installAuth } from './http/auth.ts';
import { clientErrorHandler, frameworkErrorHandler, installErrorHandling } from './http/error-handler.ts';
import { installCors } from './http/cors.ts';
import { stalledBodyGuard } from './http/stalled-body.ts';
import { installJsonParser } from './http/json-body.ts';
import { registerDocs, registerRouteRules } from './http/openapi.ts';
import type { RouteEntry } from './http/route-config.ts';
import type { Clock } from './clock.ts';
import { createKeysModule } from './keys/keys.module.ts';
import { redactUrl } from './logging.ts';
import type { RateLimitStore } from './ratelimit/ratelimit.ts';
import type { ToolState } from './startup-summary.ts';
import { createChatbotsModule } from './chatbots/chatbots.module.ts';
import { createCollectionsModule } from './collections/collections.module.ts';
import { createDocumentsModule } from './documents/documents.module.ts';
import { createEmbeddingsModule } from './embeddings/embeddings.module.ts';
import type { EmbeddingRegistry } from './embeddings/registry.ts';
import type { IngestionWorker } from './ingestion/worker.ts';
import type { Metrics } from './metrics/metrics.ts';
import { installHttpMetrics, metricsRoutes } from './metrics/metrics.routes.ts';
import { createProcessing } from './modules.ts';
import { createDurableCounters } from './ratelimit/durable.ts';
import { isMemoryStore } from './ratelimit/memory.store.ts';
import { createSpawner, type Spawner } from './processes/spawner.ts';
import { createToolsModule } from './tools/tools.module.ts';
import { createRetrievalModule } from './retrieval/retrieval.module.ts';
import type { UsageRecorder } from './usage/usage.recorder.ts';

export interface AppDeps {
  config: Config;
  database: Database;
  limiter: RateLimitStore;
  logger: Logger;
  embeddings: EmbeddingRegistry;
  clock?: Clock;
  /** Forks child processes (parsers, sandboxed programs), started before the database and the model; absent: the app's own. */
  spawner?: Spawner;
}

export interface App {
  server: FastifyInstance;
  /** Every /api/v1 route with its declared access, for docs and the authorisation matrix. */
  routes: readonly RouteEntry[];
  /** The in-process ingestion worker, when INGESTION_CONCURRENCY > 0. */
  worker: IngestionWorker | undefined;
  /**
   * Marks the instance as draining: /readyz answers 503, responses close their connections, and
   * the in-process worker stops and returns its jobs to the queue, while in-flight work finishes.
   */
  beginShutdown(): void;
  /** The shutdown deadline passed: streams still open end with an error event and `[DONE]`. */
  endStreams(): void;
  /** This process's Prometheus registry (served at /metrics when METRICS_TOKEN is set). */
  metrics: Metrics;
  /** Chat service and embedding backends, for other domains (chatbots, embeddings route). */
  gateway: Gateway;
  /** Usage counters, written in batches; flushed when the server closes. */
  usage: UsageRecorder;
  /** Which tools are on, and why the others are not (for the start-up summary). */
  toolStates(): Promise<ToolState[]>;
  /**
   * Listens on host:port with the configured acceptors and backlog (LISTEN_ACCEPTORS,
   * LISTEN_BACKLOG); resolves to the port. Closing the server stops every acceptor.
   */
  listen(address: { host: string; port: number }): Promise<number>;
}

/**
 * Fastify's trust for X-Forwarded-For. `true` is the nearest proxy alone (Fastify's own `true`
 * believes every address in the header, the first of which the client writes), a number that many
 * hops (Fastify takes a number as trusting nobody), a list its addresses and ranges.
 */
function proxyTrust(setting: boolean | number | string[]) {
  if (setting === false || setting === 0) return false;
  const hops = setting === true ? 1 : setting;
  if (typeof hops !== 'number') return hops;
  return (_address: string, hop: number) => hop < hops;
}

const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

const incomingRequestId = /^[A-Za-z0-9._:-]{1,128}$/;

export async function buildApp(deps: AppDeps): Promise<App> {
  const { config, database, limiter, logger } = deps;
  const clock = deps.clock ?? Date.now;
  let shuttingDown = false;
  const streamsEnd = new AbortController();
  // Parsers and sandboxed programs are forked by it; the server's own was started while it was small.
  const spawner = deps.spawner ?? createSpawner({ logger });
  // Built before the server starts taking requests; its worker and webhook sender start once it is ready.
  const processing = await createProcessing({
    db: database.db,
    embeddings: deps.embeddings,
    config,
    logger,
    clock,
    concurrency: config.ingestionConcurrency,
    spawner,
  });
  const { metrics, embeddings, gateway } = processing;
  const usage = processing.usage.service;
  const { ocr } = processing.ingestion;
  const worker = processing.ingestion.service;

  const baseLogger: FastifyBaseLogger = logger;
  const routes: RouteEntry[] = [];
  const answeredEarly = (method: string, status: number) => metrics.request('unmatched', method, status, 0);
  const server = Fastify({
    loggerInstance: baseLogger,
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
    bodyLimit: config.bodyLimitBytes,
    trustProxy: proxyTrust(config.trustProxy),
    // A request that reaches a connection still open while the server closes (its headers were
    // on their way) is served like any other, its connection then closed: fastify's own 503 has
    // neither of the contract's shapes, and the close waits for it anyway.
    return503OnClosing: false,
    // Parameters are bounded by each route's schema (a 400 in the contract's shape), not by the
    // router's 100-character default, whose 414 has fastify's own body.
    routerOptions: { maxParamLength: 16_384 },
    frameworkErrors: frameworkErrorHandler(routes, answeredEarly),
    clientErrorHandler: clientErrorHandler(routes, answeredEarly),
    genReqId: (req) => {
      const incoming = req.headers['x-request-id'];
      return typeof incoming === 'string' && incomingRequestId.test(incoming) ? incoming : `req_${randomBase62(20)}`;
    },
  });
  server.setValidatorCompiler(validatorCompiler);
  server.setSerializerCompiler(serializerCompiler);
  server.decorate('shutdownSignal', streamsEnd.signal);
  // JSON is the only body format besides uploads, which register their own parser: text is a 415.
  server.removeContentTypeParser('text/plain');
  installJsonParser(server);
  installErrorHandling(server);
  // First, so a body that stops arriving is bounded whatever the hooks after it wait for.
  server.addHook('onRequest', stalledBodyGuard(config.bodyIdleMs));
  // Before authentication: a browser's preflight carries no key.
  installCors(server, config.corsOrigins);

  registerRouteRules(server, routes);

  server.addHook('onRequest', async (request, reply) => {
    void reply.header('x-request-id', request.id);
  });
  // While draining, every response ends its connection, so keep-alive clients move elsewhere.
  server.addHook('onSend', async (_request, reply) => {
    if (shuttingDown) void reply.header('connection', 'close');
  });
  installHttpMetrics(server, metrics);
  // One line per request; the key id, never the secret.
  server.addHook('onResponse', async (request, reply) => {
    // Load balancers and orchestrators poll these every few seconds: visible at debug only.
    const polled = request.routeOptions.url === '/healthz' || request.routeOptions.url === '/readyz';
    request.log[polled ? 'debug' : 'info'](
      {
        method: request.method,
        url: redactUrl(request.url),
        status: reply.statusCode,
        duration_ms: Math.round(reply.elapsedTime * 100) / 100,
        key_id: request.principal?.keyId,
      },
      'request',
    );
  });

  const keys = await createKeysModule({ database, limiter, config, logger, clock });
  server.addHook('onClose', () => keys.close());
  // In-flight requests finish before onClose hooks run, so their usage is in the last flush.
  server.addHook('onClose', () => processing.close());
  // Without Redis, the key windows of an hour or more (the daily quota among them) outlive a restart.
  if (isMemoryStore(limiter)) {
    const durable = createDurableCounters({
      store: limiter,
      db: database.db,
      logger,
      clock,
      intervalMs: config.usageFlushIntervalMs,
    });
    await durable.load();
    server.addHook('onClose', () => durable.close());
  }
  installAuth(server, {
    keys: keys.service,
    limiter,
    clock,
    unauthenticatedPerMinute: config.unauthenticatedPerMinute,
  });

  const collections = createCollectionsModule({
    db: database.db,
    embeddings,
    hnsw: config.hnsw,
    onDeleted: () => processing.purger.wake(),
  });
  const documents = createDocumentsModule({
    database,
    collections: collections.service,
    onQueued: () => worker?.wake(),
    uploadLimitBytes: config.uploadLimitBytes,
  });
  server.addHook('onClose', () => documents.close());
  const embeddingsApi = createEmbeddingsModule({ registry: embeddings, usage, quota: processing.usage.quota });
  const retrieval = createRetrievalModule({
    db: database.db,
    oneSession: database.kind === 'pglite',
    collections: collections.service,
    embeddings,
    settings: config.retrieval,
    rerank: (keyId, request, signal) => gateway.rerankers.rerank(keyId, request, signal),
    rerankServes: gateway.rerankers.serves,
  });
  const tools = createToolsModule({
    provided: [retrieval.tool],
    webSearch: config.webSearch,
    codeExecution: config.codeExecution,
    dataDir: config.dataDir,
    logger,
    spawner,
  });
  const { codeExecution } = tools;
  const backups = createBackupService({ database, logger, clock });
  const chatbots = createChatbotsModule({
    db: database.db,
    collections: collections.service,
    retrieval: retrieval.service,
    gateway: gateway.service,
    quota: processing.usage.quota,
    rerankModelExists: gateway.rerankers.serves,
    gatewayConfig: config.gateway,
    config: config.chatbots,
    logger,
    clock,
  });

  await registerDocs(server, version);
  await server.register(
    healthRoutes(
      [
        {
          name: 'database',
          critical: true,
          check: async () => {
            await database.ping();
            return { ok: true, detail: database.kind };
          },
        },
        {
          name: 'embedding_models',
          // Without its embedding model no collection can be created, filled or searched.
          critical: true,
          check: async () => {
            const models = embeddings.status();
            return { ok: models.every((m) => m.ok), detail: models.map((m) => `${m.name}: ${m.detail}`).join('; ') };
          },
        },
        {
          name: 'rate_limits',
          critical: config.redisFailureMode === 'closed',
          check: async () => limiter.health(),
        },
        codeExecution.readiness,
        { name: 'ocr', critical: false, check: async () => ({ ok: ocr.ok, detail: ocr.detail }) },
      ],
      () => shuttingDown,
    ),
  );
  if (config.metrics.token !== undefined && config.metrics.port === undefined) {
    await server.register(metricsRoutes(metrics, config.metrics.token));
  }

  // The API domains, each wired by its module; health and metrics above watch all of them.
  for (const routes of [
    keys.routes,
    processing.webhooks.routes,
    ...gateway.routes,
    collections.routes,
    documents.routes,
    embeddingsApi.routes,
    tools.routes,
    chatbots.routes,
    backupRoutes(backups),
  ])
    await server.register(routes);

  server.addHook('onClose', async () => {
    await processing.stop();
    await codeExecution.settled();
    if (deps.spawner === undefined) await spawner.close();
  });

  // How long statements wait for the embedded database's one session, on /metrics.
  const stopWaits = database.onWait?.((seconds, priority) => metrics.databaseWaited(priority, seconds));
  if (stopWaits) server.addHook('onClose', async () => void stopWaits());
  // PGlite has no autovacuum: the server stands in for it (this process owns the database).
  if (database.kind === 'pglite') {
    const maintenance = startEmbeddedMaintenance({ db: database.db, log: logger });
    server.addHook('onClose', () => maintenance.close());
  }
  await server.ready();
  processing.start();
  return {
    server,
    routes,
    worker,
    beginShutdown: () => {
      shuttingDown = true;
      void worker?.stop();
      documents.releaseWaiters();
    },
    endStreams: () => streamsEnd.abort(),
    listen: ({ host, port }) =>
      listenWithAcceptors(
        server.server,
        // Fastify passes its listen options on to Node's, which know reusePort; its types do not.
        (reusePort) => server.listen({ host, port, backlog: config.listen.backlog, ...{ reusePort } }),
        { host, port, ...config.listen },
      ),
    metrics,
    gateway,
    usage,
    toolStates: async () => {
      const python = await codeExecution.readiness.check();
      return [
        ...tools.service.all().map((t) => ({
          name: t.name,
          enabled: t.enabled(),
          reason: t.enabled() ? undefined : t.disabledReason?.(),
        })),
        { name: 'code_execution python', enabled: python.ok, reason: python.ok ? undefined : python.detail },
      ];
    },
  };
}
