import type { EmbeddingModel } from './embeddings.types.ts';

/** OpenAI's embedding names; with no upstream serving them, they are aliases of the local default. */
export const openAiEmbeddingNames = ['text-embedding-ada-002', 'text-embedding-3-small', 'text-embedding-3-large'];

export type Resolution =
  | { ok: true; model: EmbeddingModel; requested: string }
  | { ok: false; reason: 'unknown' | 'unavailable'; message: string };

export interface EmbeddingRegistry {
  /** Whether the name is one of the local models (not an alias). */
  isLocal(name: string): boolean;
  /** Maps a requested model name to the model that embeds with it. */
  resolve(name: string): Resolution;
  /** The model a collection recorded at creation, by its resolved name and provider. */
  byResolvedName(provider: string, name: string): Resolution;
  /** Local models and their state, for /readyz. */
  status(): { name: string; ok: boolean; detail: string }[];
}

export interface RegistryOptions {
  /** Local models by id; an Error records why one could not be loaded. */
  local: ReadonlyMap<string, EmbeddingModel | Error>;
  defaultLocal: string;
  /** Upstream embedding models from the gateway, when one serves the name. */
  upstream?: (name: string) => EmbeddingModel | undefined;
}

export function createEmbeddingRegistry(options: RegistryOptions): EmbeddingRegistry {
  const fromLocal = (id: string, requested: string): Resolution => {
    const entry = options.local.get(id);
    if (entry === undefined) return { ok: false, reason: 'unknown', message: `Unknown embedding model '${requested}'` };
    if (entry instanceof Error) {
      return {
        ok: false,
        reason: 'unavailable',
        message: `Embedding model '${requested}' is unavailable: ${entry.message}`,
      };
    }
    return { ok: true, model: entry, requested };
  };

  return {
    isLocal: (name) => options.local.has(name),
    resolve(name) {
      if (options.local.has(name)) return fromLocal(name, name);
      const upstream = options.upstream?.(name);
      if (upstream) return { ok: true, model: upstream, requested: name };
      if (openAiEmbeddingNames.includes(name)) return fromLocal(options.defaultLocal, name);
      return { ok: false, reason: 'unknown', message: `Unknown embedding model '${name}'` };
    },
    byResolvedName(provider, name) {
      if (provider === 'local') return fromLocal(name, name);
      const upstream = options.upstream?.(name);
      if (upstream && upstream.provider === provider) return { ok: true, model: upstream, requested: name };
      return {
        ok: false,
        reason: 'unavailable',
        message: `Embedding provider '${provider}' no longer serves '${name}'`,
      };
    },
    status() {
      return [...options.local].map(([name, entry]) => ({
        name,
        ok: !(entry instanceof Error),
        detail: entry instanceof Error ? entry.message : 'loaded',
      }));
    },
  };
}
