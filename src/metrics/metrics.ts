import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { UpstreamFailure } from '../gateway/providers/provider.ts';
import type { IngestionMetrics, JobOutcome } from '../ingestion/worker.ts';

/** Ingestion queue state as read at scrape time. */
export interface QueueStats {
  /** Jobs by state: `ready` (claimable now), `delayed` (waiting for a retry), `running`, `stalled` (lease expired). */
  jobs: Record<'ready' | 'delayed' | 'running' | 'stalled', number>;
  /** Age of the oldest claimable job, 0 when there is none. */
  oldestReadySeconds: number;
}

export interface MetricsOptions {
  /** Process, heap, event-loop and GC metrics of prom-client (off in tests that build many apps). */
  processMetrics: boolean;
  /** Read by each scrape; omitted where no database is at hand. */
  queueStats?: () => Promise<QueueStats>;
  /** Reported when reading the queue fails, so a scrape still answers. */
  onQueueError?: (error: unknown) => void;
}

const latencyBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const jobBuckets = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/**
 * One process's Prometheus registry (never prom-client's global one: tests run several apps in
 * one process) and the recording functions the domains call. Names follow Prometheus conventions:
 * `_total` counters, `_seconds` durations, base units.
 */
export function createMetrics(options: MetricsOptions) {
  const registry = new Registry();
  if (options.processMetrics) collectDefaultMetrics({ register: registry });

  const httpRequests = new Counter({
    name: 'ragport_http_requests_total',
    help: 'HTTP requests answered, by route pattern, method and status code',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [registry],
  });
  const httpDuration = new Histogram({
    name: 'ragport_http_request_duration_seconds',
    help: 'Time from request to the last byte of the response (a whole stream for streamed completions)',
    labelNames: ['route', 'method'] as const,
    buckets: latencyBuckets,
    registers: [registry],
  });
  const rejections = new Counter({
    name: 'ragport_rate_limit_rejections_total',
    help: 'Requests refused by ragport limits: rate_limit (429) or quota (403)',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const upstreamErrors = new Counter({
    name: 'ragport_upstream_errors_total',
    help: 'Failed calls to model providers (each attempt, retries included), by provider, kind and HTTP status',
    labelNames: ['provider', 'kind', 'status'] as const,
    registers: [registry],
  });
  const jobs = new Counter({
    name: 'ragport_ingestion_jobs_total',
    help: 'Ingestion jobs ended by this process, by outcome (processed, retry, failed, abandoned, deleted, cancelled)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const jobDuration = new Histogram({
    name: 'ragport_ingestion_job_duration_seconds',
    help: 'Time from claiming an ingestion job to its outcome',
    labelNames: ['outcome'] as const,
    buckets: jobBuckets,
    registers: [registry],
  });
  const embeddedTexts = new Counter({
    name: 'ragport_embedding_texts_total',
    help: 'Texts embedded, by model, provider and priority (interactive: queries and /embeddings; bulk: ingestion)',
    labelNames: ['model', 'provider', 'priority'] as const,
    registers: [registry],
  });
  const embeddedTokens = new Counter({
    name: 'ragport_embedding_tokens_total',
    help: 'Tokens embedded, by model, provider and priority',
    labelNames: ['model', 'provider', 'priority'] as const,
    registers: [registry],
  });

  const databaseWait = new Histogram({
    name: 'ragport_database_wait_seconds',
    help:
      'Embedded database only: time a statement or transaction waited for its one session before it ran, ' +
      'by priority (interactive: requests; background: ingestion)',
    labelNames: ['priority'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });

  const { queueStats } = options;
  if (queueStats) {
    // One read per scrape, shared by both gauges: prom-client collects them side by side, and the
    // age set by the other gauge's collect was the previous scrape's.
    let reading: Promise<Awaited<ReturnType<typeof queueStats>> | undefined> | undefined;
    const read = () =>
      (reading ??= queueStats()
        .catch((error: unknown) => {
          // The series go missing for this scrape (the database is down); the scrape still answers.
          options.onQueueError?.(error);
          return undefined;
        })
        .finally(() => (reading = undefined)));
    new Gauge({
      name: 'ragport_ingestion_queue_oldest_ready_seconds',
      help: 'Age of the oldest ingestion job waiting to be claimed (shared queue: the same on every process)',
      registers: [registry],
      async collect() {
        this.reset();
        const stats = await read();
        if (stats !== undefined) this.set(stats.oldestReadySeconds);
      },
    });
    new Gauge({
      name: 'ragport_ingestion_queue_jobs',
      help: 'Ingestion jobs in the shared queue by state, read from the database at scrape time',
      labelNames: ['state'] as const,
      registers: [registry],
      async collect() {
        this.reset();
        const stats = await read();
        if (stats !== undefined) for (const [state, n] of Object.entries(stats.jobs)) this.set({ state }, n);
      },
    });
  }

  const ingestion: IngestionMetrics = {
    jobEnded(outcome: JobOutcome, seconds: number) {
      jobs.inc({ outcome });
      jobDuration.observe({ outcome }, seconds);
    },
  };

  return {
    registry,
    contentType: registry.contentType,
    /** The exposition text of every metric. */
    render: () => registry.metrics(),
    request(route: string, method: string, status: number, seconds: number) {
      httpRequests.inc({ route, method, status });
      httpDuration.observe({ route, method }, seconds);
    },
    rejected(reason: 'rate_limit' | 'quota') {
      rejections.inc({ reason });
    },
    upstreamFailed(failure: UpstreamFailure) {
      upstreamErrors.inc({ provider: failure.provider, kind: failure.kind, status: failure.status ?? 'none' });
    },
    embedded(model: string, provider: string, priority: 'interactive' | 'bulk', texts: number, tokens: number) {
      embeddedTexts.inc({ model, provider, priority }, texts);
      embeddedTokens.inc({ model, provider, priority }, tokens);
    },
    databaseWaited(priority: 'interactive' | 'background', seconds: number) {
      databaseWait.observe({ priority }, seconds);
    },
    ingestion,
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
