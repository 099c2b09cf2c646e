import type { Logger } from 'pino';
import { AppError } from '../errors.ts';
import type { UsageEvent } from '../usage/usage.recorder.ts';
import { asAppError } from './gateway.errors.ts';
import type { RerankItem } from './providers/provider.ts';
import type { Registry } from './registry.ts';
import { failoverContext, withFailover, type FailoverContext, type RetryPolicy } from './reliability.ts';
import { countTextTokens } from './tokens.ts';

export interface RerankRequest {
  model: string;
  query: string;
  documents: readonly string[];
  /** Results wanted, best first; at most the number of documents. */
  topN: number;
}

export interface RerankOutcome {
  results: RerankItem[];
  totalTokens: number;
}

export interface RerankersDeps {
  registry: Registry;
  retry: RetryPolicy;
  logger: Logger;
  usage: { record(event: UsageEvent): void };
  onUpstreamFailure?: FailoverContext['onFailure'];
}

/**
 * Reranking through the providers serving the model (`rerank_models`, or discovered ids with
 * `rerank` in them), with the same retry, failover and breakers as chat and embeddings. Tokens
 * are counted against the calling key: the upstream's count, else the query once per document
 * plus the documents, which is what a cross-encoder reads.
 */
export function createRerankers({ registry, retry, logger, usage, onUpstreamFailure }: RerankersDeps) {
  return {
    async rerank(keyId: string, request: RerankRequest, signal?: AbortSignal): Promise<RerankOutcome> {
      const candidates = await registry.candidates(request.model, 'rerank');
      if (candidates.length === 0) {
        throw new AppError({
          code: 'model_not_found',
          message: `No provider serves the rerank model '${request.model}'`,
          param: 'model',
        });
      }
      const target = registry.target(request.model);
      const documents = [...request.documents];
      const topN = Math.min(request.topN, documents.length);
      let outcome;
      try {
        outcome = await withFailover(
          candidates,
          (p) => p.rerank(target, request.query, documents, topN, signal),
          failoverContext({ retry, logger, onFailure: onUpstreamFailure }, request.model, signal),
        );
      } catch (error) {
        throw asAppError(error);
      }
      const totalTokens =
        outcome.totalTokens > 0
          ? outcome.totalTokens
          : (await countTextTokens(documents)) + documents.length * (await countTextTokens([request.query]));
      usage.record({ keyId, model: request.model, promptTokens: totalTokens, completionTokens: 0 });
      return { results: outcome.results, totalTokens };
    },
  };
}

export type Rerankers = ReturnType<typeof createRerankers>;
