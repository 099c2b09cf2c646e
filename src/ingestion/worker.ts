import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { ParsingConfig } from '../config.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { randomBase62 } from '../db/ids.ts';
import { runInBackground } from '../db/priority.ts';
import type { IngestionStage } from '../db/schema/documents.ts';
import type { EmbeddingRegistry } from '../embeddings/registry.ts';
import type { Logger } from 'pino';
import { termFrequencies } from '../retrieval/analyzer.ts';
import { chunkText, type ChunkingOptions } from './chunker.ts';
import { documentTitle, withTitle } from './title.ts';
import type { ClaimedJob, JobEnd, JobsRepository } from './jobs.repository.ts';
import type { Spawner } from '../processes/spawner.ts';
import { createParsePool } from './parse-pool.ts';
import type { OcrSettings } from './parsers/ocr.ts';
import { ParseError, type DocumentFormat } from './parsers/index.ts';
import { defaultMaxChars, truncationWarning } from './parsers/types.ts';
import { UpstreamFailure } from '../gateway/providers/provider.ts';

/** How a claimed job ended in this worker. */
export type JobOutcome = 'processed' | 'retry' | 'failed' | 'abandoned' | 'deleted' | 'cancelled';

/** Where a worker reports its jobs (Prometheus in the app; absent in tests that do not look). */
export interface IngestionMetrics {
  jobEnded(outcome: JobOutcome, seconds: number): void;
}

export interface IngestionWorkerDeps {
  jobs: JobsRepository;
  embeddings: EmbeddingRegistry;
  chunking: ChunkingOptions;
  /** Parser processes: how many (at most `concurrency`), and each one's time and memory limits. */
  parsing: ParsingConfig;
  /** OCR of scanned PDF pages (from probeOcr); absent: off. */
  ocr?: OcrSettings;
  /** Forks the parser processes (the server's, started while it was small); absent: the pool's own. */
  spawner?: Spawner;
  logger: Logger;
  /** Jobs processed at once by this worker. */
  concurrency: number;
  leaseMs?: number;
  pollMs?: number;
  /** Largest text kept from one document, in characters. */
  maxChars?: number;
  /** Chunks embedded between two progress reports (and cancellation checks). */
  embedBatch?: number;
  /**
   * Least time between two progress writes of one document (default 250 ms): a short document
   * goes from claimed to processed without its intermediate stages written, which were half of
   * its database statements on the embedded database. Cancellation is checked at each write.
   */
  reportEveryMs?: number;
  metrics?: IngestionMetrics;
}

export interface IngestionWorker {
  readonly id: string;
  start(): void;
  /** A job was queued: look now instead of at the next poll. */
  wake(): void;
  /** Stops claiming, waits for or abandons running jobs, and returns unfinished ones to the queue. */
  stop(): Promise<void>;
}

class LeaseLost extends Error {}
/**
 * The job was cancelled, superseded by a replace, or its document or collection deleted: the
 * worker stops and writes nothing.
 */
class JobEnded extends Error {
  readonly outcome: JobEnd;
  constructor(outcome: JobEnd) {
    super(`job ${outcome}`);
    this.outcome = outcome;
  }
}
/** Why the signal stopped the job: the heartbeat says whether it ended or its lease was lost. */
const stopReason = (signal: AbortSignal): Error =>
  signal.reason instanceof JobEnded ? signal.reason : new LeaseLost();

/** A readable, storable message: a database error's own words rather than the query that failed. */
function describe(error: unknown): string {
  let e = error;
  while (e instanceof Error && e.message.startsWith('Failed query') && e.cause instanceof Error) e = e.cause;
  const message = e instanceof Error ? e.message : String(e);
  return message.replaceAll('\u0000', '').slice(0, 1_000);
}

const backoffMs = (attempt: number) => Math.min(60_000, 1_000 * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2);

/** The longest a job waits for an upstream embedding provider before its next attempt. */
const MAX_UPSTREAM_WAIT_MS = 10 * 60_000;

/**
 * How long an upstream provider asked for (429 Retry-After) or cannot be tried (every circuit
 * breaker of the model open): a retry sooner would be refused without reaching it and spend one
 * of the document's attempts on nothing.
 */
function upstreamWaitMs(error: unknown): number {
  for (let e = error, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (!(e instanceof UpstreamFailure)) continue;
    const retryAfter = e.status === 429 ? (e.retryAfterMs ?? 0) : 0;
    return Math.min(MAX_UPSTREAM_WAIT_MS, Math.max(retryAfter, e.availableInMs ?? 0));
  }
  return 0;
}

/**
 * Claims jobs from the PostgreSQL queue and turns each document into embedded chunks. A crash
 * loses nothing: the lease expires and another worker (or this one after a restart) retries.
 */
export function createIngestionWorker(deps: IngestionWorkerDeps): IngestionWorker {
  const { jobs, embeddings, logger } = deps;
  const leaseMs = deps.leaseMs ?? 30_000;
  const pollMs = deps.pollMs ?? 1_000;
  const id = `wrk_${randomBase62(12)}`;
  const log = logger.child({ worker: id });
  const parser = createParsePool({
    ...deps.parsing,
    concurrency: Math.min(deps.parsing.concurrency, Math.max(1, deps.concurrency)),
    logger: log,
    ocr: deps.ocr,
    spawner: deps.spawner,
  });
  let running = false;
  const slots: Promise<void>[] = [];
  const inFlight = new Set<AbortController>();
  const sleepers = new Set<() => void>();
  const wakeAll = () => {
    for (const wake of [...sleepers]) wake();
  };

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        sleepers.delete(done);
        resolve();
      }
      sleepers.add(done);
    });

  const embedBatch = Math.max(1, deps.embedBatch ?? 32);
  const reportEveryMs = deps.reportEveryMs ?? 250;

  /** What stops a job this worker found it no longer holds. */
  const notHeld = async (job: ClaimedJob): Promise<Error> => {
    const ending = await jobs.ending(job.jobId);
    return ending === 'lost' ? new LeaseLost() : new JobEnded(ending);
  };

  const process = async (job: ClaimedJob, signal: AbortSignal): Promise<JobOutcome> => {
    const doc = await jobs.document(job);
    if (!doc) return 'deleted'; // Deleted meanwhile: the job went with it.
    /**
     * Shows the stage on the document, unless the last write is more recent than reportEveryMs
     * (the claim wrote the first); the job may have been cancelled or superseded meanwhile.
     */
    let reportedAt = performance.now();
    const report = async (stage: IngestionStage, counts?: { embedded: number; total: number }) => {
      if (signal.aborted) throw stopReason(signal);
      if (performance.now() - reportedAt < reportEveryMs) return;
      if (!(await jobs.progress(job, id, stage, counts))) throw await notHeld(job);
      reportedAt = performance.now();
    };
    const resolved = await embeddings.forCollection({
      provider: doc.embeddingProvider,
      model: doc.embeddingModel,
      dimensions: doc.dimensions,
    });
    if (!resolved.ok) throw new Error(resolved.message);
    const model = resolved.model;
    const parsed = await parser.parse(doc.original, doc.format as DocumentFormat, { maxChars: deps.maxChars }, signal);
    const warning = truncationWarning(parsed.info, deps.maxChars ?? defaultMaxChars);
    if (warning !== null) log.warn({ document_id: doc.id, truncated: parsed.info.truncated }, warning);
    await report('chunking');
    // PostgreSQL text cannot hold NUL; some PDF fonts map glyphs to it.
    const text = parsed.text.replaceAll('\u0000', '');
    // Each chunk is embedded under the document's title, and the two must fit the model's window;
    // a title that would leave a chunk less than half its budget is not used.
    const budget = Math.min(deps.chunking.maxTokens, model.maxTokens - 2);
    let title = documentTitle(doc.metadata, text);
    const titleTokens = title === undefined ? 0 : ((await model.countTokens([title]))[0] ?? 0) + 2;
    if (titleTokens > budget / 2) title = undefined;
    const maxTokens = Math.min(budget, model.maxTokens - 2 - (title === undefined ? 0 : titleTokens));
    const chunks = await chunkText(text, model, { maxTokens, overlapTokens: deps.chunking.overlapTokens });
    const seen = chunks.map((c) => withTitle(title, c.content));
    // In batches, so the document shows its progress and a cancel stops it between two of them.
    const vectors: Float32Array[] = [];
    await report('embedding', { embedded: 0, total: seen.length });
    for (let at = 0; at < seen.length; at += embedBatch) {
      const batch = await model.embed(seen.slice(at, at + embedBatch), {
        priority: 'bulk',
        signal,
        ...(doc.keyId === null ? {} : { keyId: doc.keyId }),
      });
      vectors.push(...batch.vectors);
      await report('embedding', { embedded: vectors.length, total: seen.length });
    }
    const embedded = [];
    for (const [i, c] of chunks.entries()) {
      const { tf, length } = termFrequencies(seen[i] as string);
      embedded.push({ ...c, embedding: vectors[i] as Float32Array, terms: tf, termCount: length });
      // A document of thousands of chunks must not hold the event loop while its terms are counted.
      if (i % 64 === 63) await yieldToLoop();
    }
    // Not held any more: the heartbeat may have said why already.
    const completed = await jobs.complete(job, id, model.name, embedded, signal, warning);
    if (!completed) throw signal.aborted ? stopReason(signal) : await notHeld(job);
    log.info({ document_id: doc.id, chunks: chunks.length, attempt: job.attempts }, 'document processed');
    // The version it replaced, hidden from searches already, removed a slice at a time; what a
    // failure leaves, the purger finishes.
    if (completed === 'retired') {
      const started = performance.now();
      await jobs.removeRetired(doc.id).then(
        (chunks) =>
          log.info(
            { document_id: doc.id, chunks, duration_ms: Math.round(performance.now() - started) },
            'replaced version removed',
          ),
        (error: unknown) =>
          log.warn(
            { err: error, document_id: doc.id },
            'removing the replaced version failed; the purger will finish it',
          ),
      );
    }
    return 'processed';
  };

  const runJob = async (job: ClaimedJob) => {
    const controller = new AbortController();
    inFlight.add(controller);
    // Keep the lease while working. Not held any more: another worker owns the job now (its
    // lease expired), or it was cancelled or deleted, which is no worker's loss.
    const heartbeat = setInterval(() => {
      jobs.heartbeat(job.jobId, id, leaseMs).then(
        (state) => {
          if (state === 'lost') controller.abort(new LeaseLost());
          else if (state !== 'held') controller.abort(new JobEnded(state));
        },
        (error: unknown) => log.warn({ err: error, job_id: job.jobId }, 'heartbeat failed'),
      );
    }, leaseMs / 3);
    const started = performance.now();
    let outcome: JobOutcome = 'abandoned';
    try {
      outcome = await process(job, controller.signal);
    } catch (error) {
      // The signal's reason, not the error it made: an aborted parse or embedding call throws
      // its own.
      const ended: unknown = error instanceof JobEnded ? error : controller.signal.reason;
      if (ended instanceof JobEnded) {
        outcome = ended.outcome;
        log.info(
          { job_id: job.jobId, document_id: job.documentId },
          outcome === 'deleted' ? 'job stopped: document deleted' : 'job stopped: cancelled or superseded',
        );
        return;
      }
      if (error instanceof LeaseLost || controller.signal.aborted) {
        log.warn({ job_id: job.jobId }, 'job abandoned (lease lost or worker stopping)');
        return;
      }
      // A replace whose content another document of the collection took meanwhile cannot commit.
      const permanent = error instanceof ParseError || isUniqueViolation(error);
      const message = isUniqueViolation(error)
        ? 'Document already exists: another document of the collection has this content'
        : describe(error);
      const retry =
        !permanent && job.attempts < job.maxAttempts ? Math.max(backoffMs(job.attempts), upstreamWaitMs(error)) : null;
      log.warn({ err: error, job_id: job.jobId, document_id: job.documentId, retry_in_ms: retry }, 'job failed');
      outcome = retry === null ? 'failed' : 'retry';
      await jobs.fail(job, id, message, retry);
    } finally {
      clearInterval(heartbeat);
      inFlight.delete(controller);
      deps.metrics?.jobEnded(outcome, (performance.now() - started) / 1000);
    }
  };

  let lastReap = 0;
  const loop = async () => {
    while (running) {
      try {
        // Dead workers' exhausted jobs are rare: look for them every few seconds, not per job.
        if (Date.now() - lastReap > 5_000) {
          lastReap = Date.now();
          await runInBackground(() => jobs.reapExhausted(), 'polling');
        }
        const job = await runInBackground(() => jobs.claim(id, leaseMs), 'polling');
        if (job) {
          await runJob(job);
          continue;
        }
      } catch (error) {
        log.error({ err: error }, 'ingestion loop error');
      }
      if (running) await sleep(pollMs);
    }
  };

  let stopped: Promise<void> | undefined;
  const stop = async () => {
    running = false;
    wakeAll();
    for (const controller of inFlight) controller.abort(new LeaseLost());
    await Promise.allSettled(slots);
    slots.length = 0;
    await parser.close();
    const released = await jobs.release(id).catch(() => 0);
    if (released > 0) log.info({ released }, 'returned unfinished jobs to the queue');
  };

  return {
    id,
    start() {
      if (running) return;
      running = true;
      // Every statement of the loop waits behind interactive ones on the embedded database.
      for (let i = 0; i < deps.concurrency; i++) slots.push(runInBackground(loop));
    },
    wake: wakeAll,
    // Shutdown calls it as soon as the signal comes and again when the server closes: once is enough.
    stop: () => (stopped ??= stop()),
  };
}
