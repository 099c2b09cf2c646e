import type { Logger } from 'pino';
import type { TokenQuota } from '../usage/quota.ts';
import type { UsageRecorder } from '../usage/usage.recorder.ts';
import { createUpstreamEmbeddings } from '../embeddings/upstream.model.ts';
import { createEmbeddingBackends } from './embeddings.ts';
import { gatewayRoutes } from './gateway.routes.ts';
import { createGatewayService } from './gateway.service.ts';
import type { ResolvedGatewayConfig, ResolvedProvider } from './providers/config.ts';
import { createOpenAICompatibleProvider } from './providers/openai-compatible/adapter.ts';
import type { ChatProvider, UpstreamFailure } from './providers/provider.ts';
import { createRegistry } from './registry.ts';
import { createRerankers } from './rerank.ts';
import { rerankRoutes } from './rerank.routes.ts';
import type { Clock } from '../clock.ts';

export interface GatewayDeps {
  config: ResolvedGatewayConfig;
  usage: UsageRecorder;
  quota: TokenQuota;
  logger: Logger;
  clock: Clock;
  /** Every provider is OpenAI-compatible today; tests may put a fake here. */
  createProvider?: (config: ResolvedProvider) => ChatProvider;
  /** Told of every failed upstream call (metrics). */
  onUpstreamFailure?: (failure: UpstreamFailure) => void;
}

/**
 * The gateway domain wired from its configuration: chat completions and models, rerank, the
 * embedding backends other domains use, and the provider pools.
 */
export function createGatewayModule(deps: GatewayDeps) {
  const logger = deps.logger.child({ component: 'gateway' });
  const registry = createRegistry({
    config: deps.config,
    createProvider: deps.createProvider ?? createOpenAICompatibleProvider,
    clock: deps.clock,
    logger,
  });
  const retry = {
    maxRetries: deps.config.retry.max_retries,
    baseDelayMs: deps.config.retry.base_delay_ms,
    maxDelayMs: deps.config.retry.max_delay_ms,
  };
  const { onUpstreamFailure } = deps;
  const observe = onUpstreamFailure ? { onUpstreamFailure } : {};
  const service = createGatewayService({ registry, retry, usage: deps.usage, quota: deps.quota, logger, ...observe });
  const rerankers = createRerankers({ registry, retry, logger, usage: deps.usage, quota: deps.quota, ...observe });
  const embeddingBackend = createEmbeddingBackends({ registry, retry, logger, ...observe });
  return {
    /** /chat/completions and /models, then /rerank. */
    routes: [gatewayRoutes(service), rerankRoutes(rerankers)],
    service,
    embeddingBackend,
    /** Upstream embedding models for the embedding registry; tokens count in this gateway's usage. */
    embeddingModels: createUpstreamEmbeddings({
      backends: embeddingBackend,
      target: registry.target,
      providerOf: async (model) => (await registry.candidates(model, 'embedding'))[0]?.provider.name,
      unlisted: () => registry.unlisted(),
      usage: deps.usage,
    }),
    rerankers,
    providers: registry.providers,
    close: () => registry.close(),
  };
}

export type Gateway = ReturnType<typeof createGatewayModule>;
