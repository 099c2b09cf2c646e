import type { EmbeddingResult } from './embeddings.types.ts';

/** A model thread as the lane uses it: embeds a piece of texts, vectors in its order. */
export interface LaneThread {
  embed(texts: string[], batching: 'alone' | 'padded'): Promise<{ vectors: Float32Array[]; tokenCounts: number[] }>;
}

export interface BulkLaneOptions {
  batching: 'alone' | 'padded';
  /**
   * Texts a thread takes at a time at most: 1 when texts run alone; else a padded batch, of which
   * each thread takes an equal share of what is queued, up to this.
   */
  piece: number;
  /** Pieces a thread holds at once: the one it runs and the next, already in its message queue. */
  depth?: number;
}

interface Call {
  texts: readonly string[];
  vectors: Float32Array[];
  promptTokens: number;
  left: number;
  settled: boolean;
  resolve: (result: EmbeddingResult) => void;
  reject: (error: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

interface Item {
  call: Call;
  index: number;
}

/**
 * The bulk lane's queue (ingestion's chunk vectors): the texts of every pending call in the order
 * they came, taken a piece at a time by whichever model thread is free. There is no batch to wait
 * out: a document of three chunks on two threads does not leave one idle while the other embeds its
 * third, the next document's first text goes there. Each thread also holds its next piece already,
 * so it does not wait for a busy event loop between two (with small documents the threads were
 * idle a sixth of the time, `bench/ingestion/responsiveness.ts`). A call resolves when its last
 * text is embedded; a call whose signal is aborted is rejected at once and its texts still queued
 * are dropped.
 */
export function createBulkLane(options: BulkLaneOptions) {
  const depth = Math.max(1, options.depth ?? 2);
  const piece = Math.max(1, options.piece);
  let queue: Item[] = [];
  let head = 0;
  let threads: readonly LaneThread[] = [];
  const held = new Map<LaneThread, number>();

  const settle = (call: Call) => {
    call.settled = true;
    if (call.onAbort) call.signal?.removeEventListener('abort', call.onAbort);
  };
  const fail = (call: Call, error: unknown) => {
    if (call.settled) return;
    settle(call);
    call.reject(error);
  };

  const take = (): Item[] => {
    const share = Math.min(piece, Math.ceil((queue.length - head) / Math.max(1, threads.length)));
    const taken: Item[] = [];
    while (head < queue.length && taken.length < share) {
      const item = queue[head++] as Item;
      if (!item.call.settled) taken.push(item);
    }
    // Taken items go, so that a queue never empty under a long ingestion does not keep them all.
    if (head === queue.length) {
      queue = [];
      head = 0;
    } else if (head >= 1_024 && head * 2 >= queue.length) {
      queue = queue.slice(head);
      head = 0;
    }
    return taken;
  };

  const send = (thread: LaneThread, items: Item[]) => {
    held.set(thread, (held.get(thread) ?? 0) + 1);
    thread
      .embed(
        items.map((item) => item.call.texts[item.index] as string),
        options.batching,
      )
      .then(
        ({ vectors, tokenCounts }) => {
          items.forEach((item, k) => {
            const call = item.call;
            if (call.settled) return;
            call.vectors[item.index] = vectors[k] as Float32Array;
            call.promptTokens += tokenCounts[k] ?? 0;
            if (--call.left === 0) {
              settle(call);
              call.resolve({ vectors: call.vectors, promptTokens: call.promptTokens });
            }
          });
        },
        (error: unknown) => {
          for (const item of items) fail(item.call, error);
        },
      )
      .finally(() => {
        held.set(thread, (held.get(thread) ?? 1) - 1);
        pump();
      });
  };

  // Breadth first: every thread gets a piece to run before any gets a second to hold.
  const pump = () => {
    for (let level = 1; level <= depth; level++) {
      for (const thread of threads) {
        if ((held.get(thread) ?? 0) >= level) continue;
        const items = take();
        if (items.length === 0) return;
        send(thread, items);
      }
    }
  };

  let closed: Error | undefined;

  return {
    /** Embeds `texts` on `on` (the lane's current threads), after the texts queued before them. */
    run(on: readonly LaneThread[], texts: readonly string[], signal?: AbortSignal): Promise<EmbeddingResult> {
      if (closed) return Promise.reject(closed);
      if (texts.length === 0) return Promise.resolve({ vectors: [], promptTokens: 0 });
      // The reason is the caller's own (the worker aborts with its errors).
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
      if (signal?.aborted) return Promise.reject(signal.reason);
      if (on !== threads) {
        threads = on;
        for (const thread of held.keys()) if (!on.includes(thread) && held.get(thread) === 0) held.delete(thread);
      }
      return new Promise<EmbeddingResult>((resolve, reject) => {
        const call: Call = {
          texts,
          vectors: new Array<Float32Array>(texts.length),
          promptTokens: 0,
          left: texts.length,
          settled: false,
          resolve,
          reject,
          signal,
          onAbort: undefined,
        };
        if (signal) {
          call.onAbort = () => fail(call, signal.reason);
          signal.addEventListener('abort', call.onAbort, { once: true });
        }
        for (let index = 0; index < texts.length; index++) queue.push({ call, index });
        pump();
      });
    },
    /**
     * Fails every call still waiting with `error` and takes none from then on; pieces already on a
     * thread run to their end (their results are dropped).
     */
    close(error: Error): void {
      closed ??= error;
      for (let i = head; i < queue.length; i++) fail((queue[i] as Item).call, error);
      queue = [];
      head = 0;
    },
  };
}
