import type { Logger } from 'pino';
import { asAppError } from './gateway.errors.ts';
import type { Registry } from './registry.ts';
import { failoverContext, withFailover, type FailoverContext, type RetryPolicy } from './reliability.ts';
import { countTextTokens } from './tokens.ts';
import type { EmbedRequestOptions } from './providers/provider.ts';

/** Embeddings from an upstream provider; the embeddings route and ingestion use it. */
export interface EmbeddingBackend {
  readonly model: string;
  embed(
    inputs: string[],
    signal?: AbortSignal,
    options?: EmbedRequestOptions,
  ): Promise<{ vectors: number[][]; promptTokens: number }>;
}

export interface EmbeddingBackendsDeps {
  registry: Registry;
  retry: RetryPolicy;
  logger: Logger;
  /** Batches of one call sent at once. */
  concurrency?: number;
  onUpstreamFailure?: FailoverContext['onFailure'];
}

/**
 * Resolves an embedding model to a backend routed to the providers serving it, or undefined when
 * none does (the caller then tries local models or answers model_not_found). Inputs are split
 * into batches of the providers' `embedding_batch_size`; each batch has the same retry, failover
 * and breaker handling as chat. Failures reject with AppErrors (502/504/upstream 4xx).
 */
export function createEmbeddingBackends({
  registry,
  retry,
  logger,
  concurrency = 4,
  onUpstreamFailure,
}: EmbeddingBackendsDeps) {
  return async function embeddingBackend(model: string): Promise<EmbeddingBackend | undefined> {
    const candidates = await registry.candidates(model, 'embedding');
    if (candidates.length === 0) return undefined;
    const target = registry.target(model);
    const batchSize = Math.min(...candidates.map((c) => c.provider.embeddingBatchSize));
    const context = (signal: AbortSignal | undefined) =>
      failoverContext({ retry, logger, onFailure: onUpstreamFailure }, model, signal);

    return {
      model,
      async embed(inputs, signal, options = {}) {
        const vectors = new Array<number[]>(inputs.length);
        let promptTokens = 0;
        const starts: number[] = [];
        for (let start = 0; start < inputs.length; start += batchSize) starts.push(start);
        let next = 0;
        let failed = false;
        const worker = async () => {
          while (next < starts.length && !failed) {
            const start = starts[next++] as number;
            const batch = inputs.slice(start, start + batchSize);
            const result = await withFailover(
              candidates,
              (p) => p.embed(target, batch, signal, options),
              context(signal),
            ).catch((error: unknown) => {
              // One failed batch fails the call: the other workers take no new batch.
              failed = true;
              throw error;
            });
            for (let i = 0; i < result.vectors.length; i++) vectors[start + i] = result.vectors[i] as number[];
            promptTokens += result.promptTokens > 0 ? result.promptTokens : await countTextTokens(batch);
          }
        };
        try {
          await Promise.all(Array.from({ length: Math.min(concurrency, starts.length) }, worker));
        } catch (error) {
          throw asAppError(error);
        }
        return { vectors, promptTokens };
      },
    };
  };
}

export type EmbeddingBackendLookup = ReturnType<typeof createEmbeddingBackends>;
