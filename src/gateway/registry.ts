import type { Logger } from 'pino';
import type { z } from 'zod';
import type { modelEntry } from './gateway.schemas.ts';
import type { ResolvedGatewayConfig, ResolvedProvider } from './providers/config.ts';
import type { ChatProvider } from './providers/provider.ts';
import { CircuitBreaker, type Candidate } from './reliability.ts';
import type { Clock } from '../clock.ts';

export type ModelKind = 'chat' | 'embedding' | 'rerank';

/** One model as `GET /models` lists it. */
export type ModelEntry = z.infer<typeof modelEntry>;

/**
 * Discovered models are sorted by name: embedding models have `embed` in it, rerank models
 * `rerank`; audio, image and moderation models are no chat models.
 */
const isEmbeddingModel = (id: string) => /embed/i.test(id);
const isRerankModel = (id: string) => /rerank/i.test(id);
const isChatModel = (id: string) =>
  !isEmbeddingModel(id) && !isRerankModel(id) && !/whisper|tts|dall-e|moderation|transcribe/i.test(id);

const DISCOVERY_RETRY_MS = 15_000;

interface ProviderState {
  config: ResolvedProvider;
  candidate: Candidate;
  chat: ReadonlySet<string>;
  embedding: ReadonlySet<string>;
  rerank: ReadonlySet<string>;
  created: ReadonlyMap<string, number>;
  /** Discovered providers only: when the list was last fetched or tried. */
  discovers: boolean;
  loadedAt: number | null;
  triedAt: number | null;
  pending: Promise<void> | null;
}

export interface RegistryDeps {
  config: ResolvedGatewayConfig;
  createProvider: (config: ResolvedProvider) => ChatProvider;
  clock: Clock;
  logger: Logger;
}

/**
 * Which providers serve which model. Listed models are known at once; the others come from each
 * upstream's /models, cached for `models_cache_ttl_ms` and refreshed in the background.
 */
export function createRegistry({ config, createProvider, clock, logger }: RegistryDeps) {
  const startedAt = Math.floor(clock() / 1000);
  const states: ProviderState[] = [...config.providers]
    .sort((a, b) => a.priority - b.priority)
    .map((p) => ({
      config: p,
      candidate: {
        provider: createProvider(p),
        breaker: new CircuitBreaker(
          {
            failureThreshold: config.circuit_breaker.failure_threshold,
            cooldownMs: config.circuit_breaker.cooldown_ms,
          },
          clock,
        ),
        maxRetries: p.max_retries ?? config.retry.max_retries,
      },
      chat: new Set(p.models ?? []),
      embedding: new Set(p.embedding_models ?? []),
      rerank: new Set(p.rerank_models ?? []),
      created: new Map(),
      discovers: p.models === undefined,
      loadedAt: null,
      triedAt: null,
      pending: null,
    }));

  // model → providers serving it, per kind; rebuilt whenever a model list changes.
  let routes = new Map<string, ProviderState[]>();
  let listing: ModelEntry[] | null = null;
  const routeKey = (kind: ModelKind, model: string) => `${kind}:${model}`;
  const rebuild = () => {
    const next = new Map<string, ProviderState[]>();
    for (const state of states) {
      for (const [kind, models] of [
        ['chat', state.chat],
        ['embedding', state.embedding],
        ['rerank', state.rerank],
      ] as const) {
        for (const model of models) {
          const key = routeKey(kind, model);
          next.set(key, [...(next.get(key) ?? []), state]);
        }
      }
    }
    routes = next;
    listing = null;
  };
  rebuild();

  const refresh = (state: ProviderState): Promise<void> => {
    state.pending ??= (async () => {
      state.triedAt = clock();
      try {
        const signal = AbortSignal.timeout(Math.min(state.config.timeout_ms, 10_000));
        const models = await state.candidate.provider.listModels(signal);
        const ids = models.map((m) => m.id);
        state.chat = new Set(ids.filter(isChatModel));
        if (state.config.embedding_models === undefined) state.embedding = new Set(ids.filter(isEmbeddingModel));
        if (state.config.rerank_models === undefined) state.rerank = new Set(ids.filter(isRerankModel));
        state.created = new Map(models.map((m) => [m.id, m.created]));
        state.loadedAt = clock();
        rebuild();
      } catch (error) {
        logger.warn({ provider: state.config.name, err: error }, 'model discovery failed; keeping the last list');
      } finally {
        state.pending = null;
      }
    })();
    return state.pending;
  };

  /** Waits for providers never loaded yet; refreshes stale ones in the background. */
  const ensureLoaded = async (): Promise<void> => {
    const now = clock();
    const waits: Promise<void>[] = [];
    for (const state of states) {
      if (!state.discovers) continue;
      if (state.pending !== null) {
        if (state.loadedAt === null) waits.push(state.pending);
        continue;
      }
      const stale = state.loadedAt === null || now - state.loadedAt >= state.config.models_cache_ttl_ms;
      // The retry interval holds back a provider whose last attempt failed, not one refreshed
      // as its `models_cache_ttl_ms` says (a ttl under 15 s waited 15 s all the same).
      const failedLast = state.triedAt !== null && (state.loadedAt === null || state.loadedAt < state.triedAt);
      const mayTry = !failedLast || now - (state.triedAt ?? 0) >= DISCOVERY_RETRY_MS;
      if (!stale || !mayTry) continue;
      const refreshing = refresh(state);
      if (state.loadedAt === null) waits.push(refreshing);
    }
    if (waits.length > 0) await Promise.all(waits);
  };

  const discovering = states.some((s) => s.discovers);

  const order = (serving: ProviderState[]): Candidate[] => {
    if (serving.length === 1) return [(serving[0] as ProviderState).candidate];
    // Already sorted by priority; shuffle by weight within each priority.
    const out: Candidate[] = [];
    for (let i = 0; i < serving.length;) {
      let j = i;
      while (j < serving.length && serving[j]?.config.priority === serving[i]?.config.priority) j++;
      const group = serving.slice(i, j);
      while (group.length > 0) {
        const total = group.reduce((sum, s) => sum + s.config.weight, 0);
        let pick = Math.random() * total;
        let index = group.findIndex((s) => (pick -= s.config.weight) < 0);
        if (index === -1) index = group.length - 1;
        out.push((group.splice(index, 1)[0] as ProviderState).candidate);
      }
      i = j;
    }
    return out;
  };

  return {
    /** Whether any provider is configured at all (for the hint on an unknown model). */
    hasChatProviders: (): boolean => states.length > 0,

    /** The upstream model name an alias stands for (the name itself when it is no alias). */
    target: (model: string): string => config.aliases[model] ?? model,

    /** Providers serving `model` (after aliases), in the order to try them; empty when none. */
    async candidates(model: string, kind: ModelKind): Promise<Candidate[]> {
      if (discovering) await ensureLoaded();
      const serving = routes.get(routeKey(kind, config.aliases[model] ?? model));
      return serving === undefined ? [] : order(serving);
    },

    /** Providers that discover their models and whose list could not be read yet. */
    async unlisted(): Promise<string[]> {
      if (discovering) await ensureLoaded();
      return states.filter((s) => s.discovers && s.loadedAt === null).map((s) => s.config.name);
    },

    /** Chat models of every provider (aliases included), first provider by priority owning each. */
    async models(): Promise<ModelEntry[]> {
      if (discovering) await ensureLoaded();
      if (listing !== null) return listing;
      const seen = new Map<string, ModelEntry>();
      for (const state of states) {
        for (const id of state.chat) {
          if (!seen.has(id))
            seen.set(id, {
              id,
              object: 'model',
              created: state.created.get(id) || startedAt,
              owned_by: state.config.name,
            });
        }
      }
      for (const [alias, target] of Object.entries(config.aliases)) {
        const owner = seen.get(target);
        if (owner !== undefined && !seen.has(alias)) seen.set(alias, { ...owner, id: alias });
      }
      listing = [...seen.values()];
      return listing;
    },

    providers: () => states.map((s) => ({ name: s.config.name, breaker: s.candidate.breaker.state })),

    async close(): Promise<void> {
      await Promise.all(states.map((s) => s.candidate.provider.close()));
    },
  };
}

export type Registry = ReturnType<typeof createRegistry>;
