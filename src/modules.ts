import type { Logger } from 'pino';
import type { Clock } from './clock.ts';
import type { Config } from './config.ts';
import type { Db } from './db/client.ts';
import type { EmbeddingRegistry } from './embeddings/registry.ts';
import { createCollectionPurger } from './collections/purge.ts';
import { createGatewayModule } from './gateway/gateway.module.ts';
import { createIngestionModule } from './ingestion/ingestion.module.ts';
import { createJobsRepository } from './ingestion/jobs.repository.ts';
import { countEmbeddings } from './metrics/embeddings.ts';
import { createMetrics } from './metrics/metrics.ts';
import type { Spawner } from './processes/spawner.ts';
import { createUsageModule } from './usage/usage.module.ts';
import type { WebhookSender } from './webhooks/sender.ts';
import { createWebhooksModule } from './webhooks/webhooks.module.ts';

export interface ProcessingDeps {
  db: Db;
  /** The local models; models the gateway's providers serve join them here. */
  embeddings: EmbeddingRegistry;
  config: Config;
  logger: Logger;
  clock: Clock;
  /** Ingestion jobs at once in this process; 0: none, and no webhook sender either. */
  concurrency: number;
  /** Forks child processes (parsers), started while the process was small; absent: ingestion's own. */
  spawner?: Spawner;
}

/**
 * What the server (src/app.ts) and the standalone worker (src/worker.ts) wire alike, in one
 * place: this process's metrics (which read the ingestion queue), usage and the gateway (a
 * collection on an upstream model embeds through its providers, the tokens counted against the
 * uploading key), the embedding registry over both, ingestion (OCR probe, worker) and webhooks
 * (whose deliveries every ingesting process sends). The server adds the API domains on top.
 */
export async function createProcessing(deps: ProcessingDeps) {
  const { db, config, logger, clock } = deps;
  const jobs = createJobsRepository(db);
  const metrics = createMetrics({
    processMetrics: config.metrics.token !== undefined,
    queueStats: () => jobs.queueStats(),
    onQueueError: (error) => logger.warn({ err: error }, 'metrics: ingestion queue unreadable'),
  });
  const usage = createUsageModule({ db, config, logger, clock });
  const gateway = createGatewayModule({
    config: config.gateway,
    usage: usage.service,
    quota: usage.quota,
    logger,
    clock,
    onUpstreamFailure: (failure) => metrics.upstreamFailed(failure),
  });
  // One registry: the local models, and the models the gateway's providers serve.
  const embeddings = countEmbeddings(deps.embeddings.withUpstream(gateway.embeddingModels), metrics);
  const ingestion = await createIngestionModule({
    jobs,
    embeddings,
    metrics: metrics.ingestion,
    config,
    logger,
    concurrency: deps.concurrency,
    spawner: deps.spawner,
  });
  const webhooks = createWebhooksModule({ db, config: config.webhooks, logger });
  // Deleted collections' rows, removed in short transactions: in every process with the database.
  const purger = createCollectionPurger({ db, logger });
  let sender: WebhookSender | undefined;
  return {
    metrics,
    usage,
    gateway,
    embeddings,
    ingestion,
    webhooks,
    purger,
    /** Starts purging deleted collections, and claiming jobs and sending deliveries when this process ingests. */
    start(): void {
      purger.start();
      if (ingestion.service === undefined) return;
      ingestion.service.start();
      sender = webhooks.startSender();
    },
    /** Stops the worker (running jobs finish or go back to the queue), the sender and the purger. */
    async stop(): Promise<void> {
      await ingestion.service?.stop();
      await sender?.stop();
      await purger.stop();
    },
    /** Flushes usage (the worker's upstream embeddings included) and closes the provider pools. */
    async close(): Promise<void> {
      await usage.close();
      await gateway.close();
    },
  };
}

export type Processing = Awaited<ReturnType<typeof createProcessing>>;
