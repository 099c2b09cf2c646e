import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { createBatcher } from './batcher.ts';
import { createBulkLane } from './bulk-lane.ts';
import type { EmbeddingModel } from './embeddings.types.ts';
import type { ModelCard, ThreadMessage, ThreadOptions, ThreadRequest } from './local.worker.ts';

/** What transformers.js cannot tell from a model's files: how sentence vectors are pooled. */
const cards: Record<string, ModelCard> = {
  'sentence-transformers/all-MiniLM-L6-v2': { pooling: 'mean', maxTokens: 256, queryPrefix: '' },
  'sentence-transformers/all-MiniLM-L12-v2': { pooling: 'mean', maxTokens: 256, queryPrefix: '' },
  'BAAI/bge-small-en-v1.5': {
    pooling: 'cls',
    maxTokens: 512,
    queryPrefix: 'Represent this sentence for searching relevant passages: ',
  },
  'BAAI/bge-base-en-v1.5': {
    pooling: 'cls',
    maxTokens: 512,
    queryPrefix: 'Represent this sentence for searching relevant passages: ',
  },
};

export interface LocalModelOptions {
  id: string;
  /** Read weights from here (air-gapped installs); without it they come from the model hub. */
  modelsDir: string | undefined;
  /** Where hub downloads are cached. */
  cacheDir: string;
  dtype: 'fp32' | 'q8';
  threads?: number;
  maxBatch?: number;
  /**
   * How the texts of a batch share an inference run. `padded`: one run over the batch padded to its
   * longest text; `alone`: one run per text, unpadded. The int8 model quantizes its activations
   * dynamically over the whole input tensor, so batched q8 vectors depend on their companions
   * (cosine ~0.99); it runs texts alone, which costs nothing on a few cores (bench/embed). fp32
   * batches are exact up to float rounding. Default: `alone` for q8, `padded` for fp32.
   */
  batching?: 'alone' | 'padded';
  /** The bulk lane's model threads and their ONNX Runtime threads; default `bulkLayout(threads)`. */
  bulk?: { threads: number; intraOp: number };
}

export class ModelUnavailableError extends Error {}

const workerUrl = new URL('./local.worker.ts', import.meta.url);

interface Embedded {
  vectors: Float32Array[];
  tokenCounts: number[];
}

/** A model loaded on a thread of its own (local.worker.ts), answering one request at a time. */
interface ModelThread {
  dimensions: number;
  embed(texts: string[], batching: 'alone' | 'padded'): Promise<Embedded>;
  count(texts: string[]): Promise<number[]>;
  /** Resolves once no request is on the thread: what it was given has returned. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

type Answer = Extract<ThreadMessage, { ok: true }>;

async function startModelThread(options: ThreadOptions): Promise<ModelThread> {
  const worker = new Worker(workerUrl, { workerData: options });
  const pending = new Map<number, { resolve: (m: Answer) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  let gone: Error | undefined;
  let idlers: (() => void)[] = [];
  // Like a socket, the thread keeps the process alive only while it has work.
  const track = () => {
    if (pending.size > 0) return worker.ref();
    worker.unref();
    for (const resolve of idlers) resolve();
    idlers = [];
  };
  const dimensions = await new Promise<number>((resolve, reject) => {
    worker.once('message', (message: ThreadMessage) => {
      if ('ready' in message) resolve(message.dimensions);
      else reject(new Error('failed' in message ? message.failed : 'the model thread answered before it was ready'));
    });
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the model thread exited (${code}) while loading`)));
  });
  const fail = (error: Error) => {
    gone ??= error;
    for (const { reject } of pending.values()) reject(error);
    pending.clear();
    track();
  };
  worker.on('message', (message: ThreadMessage) => {
    if (!('id' in message)) return;
    const waiter = pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id);
    track();
    if (message.ok) waiter.resolve(message);
    else waiter.reject(new Error(message.message));
  });
  worker.on('error', (error: Error) => fail(new Error(`the embedding model thread failed: ${error.message}`)));
  worker.on('exit', (code) => fail(new Error(`the embedding model thread exited (${code})`)));
  track();
  type Op = ThreadRequest extends infer R ? (R extends unknown ? Omit<R, 'id'> : never) : never;
  const call = (request: Op) => {
    if (gone) return Promise.reject(gone);
    const id = nextId++;
    return new Promise<Answer>((resolve, reject) => {
      pending.set(id, { resolve, reject });
      track();
      worker.postMessage({ ...request, id });
    });
  };
  return {
    dimensions,
    embed: async (texts, batching) => {
      const { vectors = [], tokenCounts } = await call({ op: 'embed', texts, batching });
      return { vectors, tokenCounts };
    },
    count: async (texts) => (await call({ op: 'count', texts })).tokenCounts,
    idle: () => (pending.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => idlers.push(resolve))),
    close: async () => {
      gone ??= new Error('the embedding model was closed');
      await worker.terminate();
    },
  };
}

/** Scheduling niceness of the bulk lane's threads: below the database's, the event loop's and queries'. */
const BULK_NICENESS = 10;

/** Bulk threads unused this long are stopped, and their memory returned; the next ingestion starts them again. */
const BULK_IDLE_MS = 60_000;

/**
 * The bulk lane's model threads at most. Each holds its own copy of the model and tokenizer
 * (~120 MB with the int8 MiniLM), so more cores give each thread more ONNX Runtime threads instead.
 */
const MAX_BULK_THREADS = 4;

/**
 * How the bulk lane splits `threads` cores: model threads running texts side by side, each with
 * `intraOp` ONNX Runtime threads. A run split across threads waits at every operator for the
 * slowest of them; when the database, a query or the event loop takes one of its cores (the bulk
 * lane runs niced), the other stalls: `bench/embed/lanes.ts` (docs/operations.md, What runs where).
 */
export function bulkLayout(threads: number): { threads: number; intraOp: number } {
  const count = Math.max(1, Math.min(threads, MAX_BULK_THREADS));
  return { threads: count, intraOp: Math.max(1, Math.floor(threads / count)) };
}

/** Starts `count` model threads, or none: if one fails to start, the others are closed. */
async function startModelThreads(count: number, options: ThreadOptions): Promise<ModelThread[]> {
  const started = await Promise.allSettled(Array.from({ length: count }, () => startModelThread(options)));
  const threads = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failure = started.find((s) => s.status === 'rejected');
  if (failure) {
    await Promise.all(threads.map((t) => t.close()));
    throw failure.reason;
  }
  return threads;
}

/**
 * A sentence-embedding model run by ONNX Runtime on threads of their own, never the server's:
 * an interactive thread (search queries, /embeddings, and token counts, which are quick), loaded
 * at once, and the bulk lane (ingestion's chunk vectors: up to four threads, see `bulkLayout`),
 * started when a document first needs it. A query never waits behind a document's chunks: the
 * interactive thread is fed by a batcher, the bulk threads by a queue of texts (`bulk-lane.ts`).
 */
export async function loadLocalModel(options: LocalModelOptions): Promise<EmbeddingModel> {
  const card = cards[options.id] ?? { pooling: 'mean', maxTokens: 256, queryPrefix: '' };
  const threads = options.threads ?? availableParallelism();
  const layout = options.bulk ?? bulkLayout(threads);
  const threadOptions = (smallSession: boolean): ThreadOptions => ({
    id: options.id,
    modelsDir: options.modelsDir,
    cacheDir: options.cacheDir,
    dtype: options.dtype,
    threads: smallSession ? threads : layout.intraOp,
    smallSession,
    // The bulk lane yields the cores to everything else (see local.worker.ts).
    niceness: smallSession ? 0 : BULK_NICENESS,
    card,
  });
  let interactive: ModelThread;
  try {
    interactive = await startModelThread(threadOptions(true));
  } catch (error) {
    const where = options.modelsDir === undefined ? 'the model hub' : `MODELS_DIR (${options.modelsDir})`;
    throw new ModelUnavailableError(
      `Embedding model ${options.id} (${options.dtype}) could not be loaded from ${where}: ${(error as Error).message}`,
      { cause: error },
    );
  }

  let bulk: Promise<ModelThread[]> | undefined;
  let bulkUsers = 0;
  let idleTimer: NodeJS.Timeout | undefined;
  /** Runs `work` on the bulk threads, starting them if needed and stopping them once idle for a while. */
  const onBulk = async <T>(work: (threads: ModelThread[]) => Promise<T>): Promise<T> => {
    clearTimeout(idleTimer);
    bulkUsers++;
    try {
      bulk ??= startModelThreads(layout.threads, threadOptions(false)).catch((error: unknown) => {
        bulk = undefined;
        throw error;
      });
      return await work(await bulk);
    } finally {
      if (--bulkUsers === 0) {
        idleTimer = setTimeout(() => {
          const threads = bulk;
          bulk = undefined;
          void threads?.then((all) => Promise.all(all.map((t) => t.close()))).catch(() => undefined);
        }, BULK_IDLE_MS);
        idleTimer.unref();
      }
    }
  };

  /** Set by `close`: nothing new goes to a model thread. */
  let closed: Error | undefined;
  const open = () => {
    if (closed) throw closed;
  };
  const batching = options.batching ?? (options.dtype === 'q8' ? 'alone' : 'padded');
  const maxBatch = options.maxBatch ?? 32;
  const interactiveBatcher = createBatcher(
    async (texts) => {
      open();
      return interactive.embed(texts, batching);
    },
    { maxBatch },
  );
  const bulkLane = createBulkLane({
    batching,
    piece: batching === 'alone' ? 1 : Math.ceil(maxBatch / layout.threads),
  });

  return {
    name: options.id,
    provider: 'local',
    dimensions: interactive.dimensions,
    maxTokens: card.maxTokens,
    // Counting is quick; on the bulk thread it waited behind whole embedding batches, and the
    // chunking of the next documents with it, leaving the bulk thread idle between them.
    countTokens: async (texts) => {
      open();
      return interactive.count([...texts]);
    },
    embed: async (texts, embedOptions = {}) => {
      open();
      const input = embedOptions.asQuery && card.queryPrefix ? texts.map((t) => card.queryPrefix + t) : [...texts];
      if (embedOptions.priority === 'bulk')
        return onBulk((threads) => bulkLane.run(threads, input, embedOptions.signal));
      return interactiveBatcher.run(input, embedOptions.signal);
    },
    /**
     * Stops the model threads once what they run has returned. A thread ended (or a process that
     * exits) in the middle of an ONNX Runtime run aborts the whole process: the run returns into
     * a JavaScript environment being torn down, and the binding's C++ exception is uncaught
     * (`terminate called after throwing an instance of 'Napi::Error'`, status 134 — a worker
     * stopped during ingestion did this). So calls not yet on a thread are refused, queued bulk
     * texts dropped, and the threads ended only when idle.
     */
    async close() {
      closed ??= new ModelUnavailableError(`Embedding model ${options.id} was closed`);
      clearTimeout(idleTimer);
      bulkLane.close(closed);
      const bulkThreads = (await bulk?.catch(() => [])) ?? [];
      const threads = [interactive, ...bulkThreads];
      await Promise.all(threads.map((t) => t.idle()));
      await Promise.all(threads.map((t) => t.close()));
    },
  };
}
