import type { EmbeddingResult } from './embeddings.types.ts';

interface Pending {
  texts: string[];
  resolve: (result: EmbeddingResult) => void;
  reject: (error: unknown) => void;
  signal: AbortSignal | undefined;
}

export interface BatcherOptions {
  maxBatch: number;
}

/**
 * Coalesces concurrent embed calls (queries, /embeddings) into batches of at most `maxBatch` texts
 * and runs one batch at a time. Within a batch, texts are sorted by length so padding is small.
 * Ingestion has threads and a queue of its own (`bulk-lane.ts`).
 */
export function createBatcher(
  run: (texts: string[]) => Promise<{ vectors: Float32Array[]; tokenCounts: number[] }>,
  options: BatcherOptions,
) {
  const queue: Pending[] = [];
  let busy = false;

  const next = (): Pending[] => {
    const taken: Pending[] = [];
    let size = 0;
    while (queue.length > 0) {
      const head = queue[0] as Pending;
      if (taken.length > 0 && size + head.texts.length > options.maxBatch) break;
      queue.shift();
      if (head.signal?.aborted) {
        head.reject(head.signal.reason);
        continue;
      }
      taken.push(head);
      size += head.texts.length;
    }
    return taken;
  };

  const runPending = async (batch: Pending[]) => {
    const all = batch.flatMap((p, owner) => p.texts.map((text, index) => ({ text, owner, index })));
    const order = all
      .map((_, i) => i)
      .sort((a, b) => (all[a] as { text: string }).text.length - (all[b] as { text: string }).text.length);
    const results = batch.map((p) => ({ vectors: new Array<Float32Array>(p.texts.length), promptTokens: 0 }));
    for (let start = 0; start < order.length; start += options.maxBatch) {
      // Work every caller gave up on (a worker stopping mid-document) ends between batches.
      if (batch.every((p) => p.signal?.aborted === true)) throw batch[0]?.signal?.reason;
      const slice = order.slice(start, start + options.maxBatch).map((i) => all[i] as (typeof all)[number]);
      const { vectors, tokenCounts } = await run(slice.map((s) => s.text));
      slice.forEach((s, i) => {
        const result = results[s.owner] as (typeof results)[number];
        result.vectors[s.index] = vectors[i] as Float32Array;
        result.promptTokens += tokenCounts[i] ?? 0;
      });
    }
    return results;
  };

  const pump = async () => {
    if (busy) return;
    busy = true;
    try {
      for (let batch = next(); batch.length > 0; batch = next()) {
        try {
          const results = await runPending(batch);
          batch.forEach((p, i) => p.resolve(results[i] as EmbeddingResult));
        } catch (error) {
          for (const p of batch) p.reject(error);
        }
      }
    } finally {
      busy = false;
    }
  };

  return {
    run(texts: string[], signal?: AbortSignal): Promise<EmbeddingResult> {
      if (texts.length === 0) return Promise.resolve({ vectors: [], promptTokens: 0 });
      return new Promise<EmbeddingResult>((resolve, reject) => {
        queue.push({ texts, resolve, reject, signal });
        void pump();
      });
    },
  };
}
