import { readFileSync } from 'node:fs';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { Database } from './db/client.ts';
import { randomBase62 } from './db/ids.ts';
import { createGateway, type Gateway } from './gateway/gateway.ts';
import { gatewayRoutes } from './gateway/gateway.routes.ts';
import { rerankRoutes } from './gateway/rerank.routes.ts';
import { healthRoutes } from './health/health.routes.ts';
import { installAuth } from './http/auth.ts';
import { frameworkErrorHandler, installErrorHandling } from './http/error-handler.ts';
import { installJsonParser } from './http/json-body.ts';
import { registerDocs, registerRouteRules } from './http/openapi.ts';
import type { RouteEntry } from './http/route-config.ts';
import { createAuthCache } from './keys/auth-cache.ts';
import { startKeyChanges, type KeyChanges } from './keys/key-changes.ts';
import { KEY_CHANGES_CHANNEL } from './keys/keys.repository.ts';
import { createKeysRepository } from './keys/keys.repository.ts';
import { keysRoutes } from './keys/keys.routes.ts';
import { createKeysService, type Clock } from './keys/keys.service.ts';
import type { RateLimitStore } from './ratelimit/ratelimit.ts';
import type { ToolState } from './startup-summary.ts';
import { createChatbots } from './chatbots/chatbots.ts';
import { createCollectionsRepository } from './collections/collections.repository.ts';
import { collectionsRoutes } from './collections/collections.routes.ts';
import { createCollectionsService } from './collections/collections.service.ts';
import { createDocumentsRepository } from './documents/documents.repository.ts';
import { documentsRoutes } from './documents/documents.routes.ts';
import { createDocumentsService } from './documents/documents.service.ts';
import { createSettledWaiters } from './documents/settled.ts';
import { startWebhookSender, type WebhookSender } from './webhooks/sender.ts';
import { createSealer } from './webhooks/signing.ts';
import { createWebhooksRepository } from './webhooks/webhooks.repository.ts';
import { webhooksRoutes } from './webhooks/webhooks.routes.ts';
import { createWebhooksService } from './webhooks/webhooks.service.ts';
import { embeddingsRoutes } from './embeddings/embeddings.routes.ts';
import { createEmbeddingsService } from './embeddings/embeddings.service.ts';
import type { EmbeddingRegistry } from './embeddings/registry.ts';
import { createJobsRepository } from './ingestion/jobs.repository.ts';
import { probeOcr } from './ingestion/ocr.ts';
import { createIngestionWorker, type IngestionWorker } from './ingestion/worker.ts';
import { countEmbeddings } from './metrics/embeddings.ts';
import { createMetrics, type Metrics } from './metrics/metrics.ts';
import { installHttpMetrics, metricsRoutes } from './metrics/metrics.routes.ts';
import { createCodeExecution } from './tools/code-execution/tool.ts';
import { anyTool } from './tools/tool.types.ts';
import { createToolRegistry } from './tools/tools.registry.ts';
import { toolsRoutes } from './tools/tools.routes.ts';
import { createWebSearchTool } from './tools/web-search/tool.ts';
import { ragSearchTool } from './retrieval/rag-search.tool.ts';
import { createRetrievalRepository } from './retrieval/retrieval.repository.ts';
import { createRetrievalService } from './retrieval/retrieval.service.ts';
import { createTokenQuota } from './usage/quota.ts';
import { createBatchedUsageRecorder, type UsageRecorder } from './usage/usage.recorder.ts';
import { createUsageRepository } from './usage/usage.repository.ts';

export interface AppDeps {
  config: Config;
  database: Database;
  limiter: RateLimitStore;
  logger: Logger;
  embeddings: EmbeddingRegistry;
  clock?: Clock;
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
  const jobs = createJobsRepository(database.db);
  const metrics = createMetrics({
    processMetrics: config.metrics.token !== undefined,
    queueStats: () => jobs.queueStats(),
    onQueueError: (error) => logger.warn({ err: error }, 'metrics: ingestion queue unreadable'),
  });

  const baseLogger: FastifyBaseLogger = logger;
  const routes: RouteEntry[] = [];
  const server = Fastify({
    loggerInstance: baseLogger,
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
    bodyLimit: config.bodyLimitBytes,
    trustProxy: config.trustProxy,
    return503OnClosing: true,
    // Parameters are bounded by each route's schema (a 400 in the contract's shape), not by the
    // router's 100-character default, whose 414 has fastify's own body.
    routerOptions: { maxParamLength: 16_384 },
    frameworkErrors: frameworkErrorHandler(routes),
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
        url: request.url,
        status: reply.statusCode,
        duration_ms: Math.round(reply.elapsedTime * 100) / 100,
        key_id: request.principal?.keyId,
      },
      'request',
    );
  });

  // The embedded database has one writer, this process, which drops a changed key itself. On a
  // server, other instances write too: their changes arrive through LISTEN, and while that
  // connection is down the cache is bypassed (every request reads its key).
  let keyChanges: KeyChanges | undefined;
  const authCache = createAuthCache({
    ttlMs: config.authCacheTtlMs,
    clock,
    usable: () => database.kind === 'pglite' || keyChanges?.live === true,
  });
  if (database.kind === 'pglite' && config.authCacheTtlMs > 0) {
    // One process owns the data directory, but several apps may share one embedded database in
    // a process (tests, embedders): the change announced in the transaction reaches each of them
    // in process before the writer's call returns.
    const subscription = await database.listen(
      KEY_CHANGES_CHANNEL,
      (keyId) => authCache.invalidate(keyId),
      () => authCache.clear(),
    );
    server.addHook('onClose', () => subscription.close());
  }
  if (database.kind === 'postgres' && config.databaseUrl !== undefined && config.authCacheTtlMs > 0) {
    keyChanges = await startKeyChanges({ url: config.databaseUrl, cache: authCache, logger });
  }
  server.addHook('onClose', async () => {
    await keyChanges?.close();
  });
  const keys = createKeysService({
    repo: createKeysRepository(database.db),
    limiter,
    clock,
    adminKey: config.adminKey,
    cache: authCache,
    ...(keyChanges ? { changes: keyChanges } : {}),
  });
  installAuth(server, { keys, limiter, clock, unauthenticatedPerMinute: config.unauthenticatedPerMinute });

  const usageRepo = createUsageRepository(database.db);
  const usage = createBatchedUsageRecorder({
    repo: usageRepo,
    clock,
    logger,
    flushIntervalMs: config.usageFlushIntervalMs,
    maxPendingRows: config.usageFlushMaxRows,
  });
  const quota = createTokenQuota({ repo: usageRepo, recorder: usage, clock, ttlMs: 5_000 });
  const gateway = createGateway({
    config: config.gateway,
    usage,
    quota,
    logger,
    clock,
    onUpstreamFailure: (failure) => metrics.upstreamFailed(failure),
  });
  // One registry: the local models, and the models the gateway's providers serve.
  const embeddings = countEmbeddings(deps.embeddings.withUpstream(gateway.embeddingModels), metrics);
  // In-flight requests finish before onClose hooks run, so their usage is in the last flush.
  server.addHook('onClose', async () => {
    await usage.close();
    await gateway.close();
  });

  await registerDocs(server, version);
  // Starts probing the Python sandbox now, so start-up logs and /readyz say whether it works.
  const codeExecution = createCodeExecution({ config: config.codeExecution, dataDir: config.dataDir, logger });
  // OCR of scanned PDF pages is on when Tesseract is installed; said at start-up and on /readyz.
  const ocr = await probeOcr(config.parsing.ocr, config.parsing.memoryMb);
  if (config.ingestionConcurrency > 0) (ocr.ok ? logger.info : logger.warn).call(logger, `ocr: ${ocr.detail}`);
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
  await server.register(keysRoutes(keys));
  const webhooksRepo = createWebhooksRepository(database.db);
  const sealer = config.webhooks.signingKey === undefined ? undefined : createSealer(config.webhooks.signingKey);
  await server.register(webhooksRoutes(createWebhooksService({ repo: webhooksRepo, sealer })));
  await server.register(gatewayRoutes(gateway.service));
  await server.register(rerankRoutes(gateway.rerankers));
  if (config.metrics.token !== undefined && config.metrics.port === undefined) {
    await server.register(metricsRoutes(metrics, config.metrics.token));
  }

  const worker =
    config.ingestionConcurrency > 0
      ? createIngestionWorker({
          jobs,
          embeddings,
          chunking: config.chunking,
          parsing: config.parsing,
          leaseMs: config.ingestionLeaseMs,
          embedBatch: config.ingestionEmbedBatch,
          ocr: ocr.settings,
          logger,
          concurrency: config.ingestionConcurrency,
          metrics: metrics.ingestion,
        })
      : undefined;
  const collections = createCollectionsService({
    repo: createCollectionsRepository(database.db),
    embeddings,
    hnsw: config.hnsw,
  });
  const settled = createSettledWaiters(database);
  server.addHook('onClose', () => settled.close());
  const documents = createDocumentsService({
    repo: createDocumentsRepository(database.db),
    collections,
    onQueued: () => worker?.wake(),
    settled,
  });
  await server.register(collectionsRoutes(collections));
  await server.register(documentsRoutes(documents, config.uploadLimitBytes));
  await server.register(embeddingsRoutes(createEmbeddingsService({ registry: embeddings, usage })));
  const retrieval = createRetrievalService({
    repo: createRetrievalRepository(database.db),
    collections,
    embeddings,
    settings: config.retrieval,
    rerank: (keyId, request, signal) => gateway.rerankers.rerank(keyId, request, signal),
  });
  const tools = createToolRegistry([
    anyTool(ragSearchTool(retrieval)),
    anyTool(createWebSearchTool({ config: config.webSearch, logger })),
    anyTool(codeExecution.tool),
  ]);
  await server.register(toolsRoutes(tools));
  const chatbots = createChatbots({
    db: database.db,
    collections,
    retrieval,
    gateway: gateway.service,
    gatewayConfig: config.gateway,
    config: config.chatbots,
    logger,
    clock,
  });
  await server.register(chatbots.routes);

  // Webhook deliveries are sent by the workers: here when this process ingests, else `npm run worker`.
  let sender: WebhookSender | undefined;
  server.addHook('onClose', async () => {
    await worker?.stop();
    await sender?.stop();
    await codeExecution.settled();
  });

  await server.ready();
  worker?.start();
  if (worker !== undefined)
    sender = startWebhookSender({ repo: webhooksRepo, sealer, config: config.webhooks, logger });
  return {
    server,
    routes,
    worker,
    beginShutdown: () => {
      shuttingDown = true;
      void worker?.stop();
    },
    endStreams: () => streamsEnd.abort(),
    metrics,
    gateway,
    usage,
    toolStates: async () => {
      const python = await codeExecution.readiness.check();
      return [
        ...tools.all().map((t) => ({
          name: t.name,
          enabled: t.enabled(),
          reason: t.enabled() ? undefined : t.disabledReason?.(),
        })),
        { name: 'code_execution python', enabled: python.ok, reason: python.ok ? undefined : python.detail },
      ];
    },
  };
}
