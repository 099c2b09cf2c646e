import type { Logger } from 'pino';
import { AppError } from '../errors.ts';
import { expectedTokens, type TokenQuota } from '../usage/quota.ts';
import type { UsageEvent } from '../usage/usage.recorder.ts';
import { asAppError } from './gateway.errors.ts';
import type { Caller } from './gateway.service.ts';
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
  /** The monthly token quota, checked for the API's callers as chat checks it. */
  quota: Pick<TokenQuota, 'admitCall'>;
  onUpstreamFailure?: FailoverContext['onFailure'];
}

/**
 * Reranking through the providers serving the model (`rerank_models`, or discovered ids with
 * `rerank` in them), with the same retry, failover and breakers as chat and embeddings. Tokens
 * are counted against the calling key: the upstream's count, else the query once per document
 * plus the documents, which is what a cross-encoder reads.
 */
/** A rerank model no provider serves, said alike by /rerank, rag_search and chatbots; `param` names where it was given. */
export const rerankModelNotFound = (model: string, param: string) =>
  new AppError({ code: 'model_not_found', message: `No provider serves the rerank model '${model}'`, param });

export function createRerankers({ registry, retry, logger, usage, quota, onUpstreamFailure }: RerankersDeps) {
  /** With a caller, its token quota is checked once the model is known, before any upstream call. */
  async function rerank(
    keyId: string,
    request: RerankRequest,
    signal: AbortSignal | undefined,
    caller?: Caller,
  ): Promise<RerankOutcome> {
    const candidates = await registry.candidates(request.model, 'rerank');
    if (candidates.length === 0) throw rerankModelNotFound(request.model, 'model');
    const documents = [...request.documents];
    const release =
      caller?.tokensPerMonth == null
        ? () => undefined
        : await quota.admitCall(
            caller.keyId,
            caller.tokensPerMonth,
            expectedTokens(documents.reduce((n, d) => n + d.length + request.query.length, 0)),
          );
    try {
      const target = registry.target(request.model);
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
    } finally {
      release();
    }
  }

  return {
    /** Whether a provider serves this rerank model (or alias): chatbots check theirs when saved. */
    serves: async (model: string) => (await registry.candidates(model, 'rerank')).length > 0,
    /**
     * A search's rerank stage (rag_search): counted against the searching key, and, like the
     * query's embedding, never refused for its token quota (docs/gateway.md).
     */
    rerank: (keyId: string, request: RerankRequest, signal?: AbortSignal) => rerank(keyId, request, signal),
    /** /rerank: refused with 403 quota_exceeded once the key's tokens this month reach its quota. */
    rerankFor: (caller: Caller, request: RerankRequest, signal?: AbortSignal) =>
      rerank(caller.keyId, request, signal, caller),
  };
}

export type Rerankers = ReturnType<typeof createRerankers>;
