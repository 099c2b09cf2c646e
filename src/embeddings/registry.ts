import type { EmbeddingModel } from './embeddings.types.ts';
import type { UpstreamEmbeddings } from './upstream.model.ts';

/** OpenAI's embedding names; with no upstream serving them, they are aliases of the local default. */
export const openAiEmbeddingNames = ['text-embedding-ada-002', 'text-embedding-3-small', 'text-embedding-3-large'];

export type Resolution =
  | { ok: true; model: EmbeddingModel; requested: string }
  | { ok: false; reason: 'unknown' | 'unavailable'; message: string };

/** What a collection recorded at creation: where its vectors come from and their length. */
export interface CollectionModel {
  /** `local`, or the upstream provider first in line at creation. */
  provider: string;
  /** The model that really embeds (`embedding_model_resolved`). */
  model: string;
  dimensions: number;
}

/**
 * Every embedding model, local (ONNX in this process) or upstream (a gateway provider), behind
 * the one `EmbeddingModel` interface. The embeddings route, collections, ingestion and search
 * all resolve through it.
 */
export interface EmbeddingRegistry {
  /**
   * Maps a requested model name to the model that embeds with it: a local model by its own name,
   * else a model an upstream serves (OpenAI's names included), else OpenAI's names are aliases of
   * the local default.
   */
  resolve(name: string, options?: ResolveOptions): Promise<Resolution>;
  /** The model a collection recorded at creation; upstream vectors are held to its dimensions. */
  forCollection(collection: CollectionModel): Promise<Resolution>;
  /** Local models and their state, for /readyz. */
  status(): { name: string; ok: boolean; detail: string }[];
  /** The same local models, with upstream models resolved through the gateway's providers. */
  withUpstream(upstream: UpstreamEmbeddings): EmbeddingRegistry;
  /** Closes the local models (see `EmbeddingModel.close`); before the process exits. */
  close(): Promise<void>;
}

export interface ResolveOptions {
  /**
   * Whether an upstream model's dimensions must be known (a collection is created with them):
   * measured by a probe call the first time. `false` for a call that only relays vectors
   * (`/embeddings`): the probe carries none of the client's fields, so a provider that requires
   * one (`input_type` for NVIDIA NIM's asymmetric models) refused every call.
   */
  measure?: boolean;
}

export interface RegistryOptions {
  /** Local models by id; an Error records why one could not be loaded. */
  local: ReadonlyMap<string, EmbeddingModel | Error>;
  defaultLocal: string;
}

const unknown = (name: string): Resolution => ({
  ok: false,
  reason: 'unknown',
  message: `Unknown embedding model '${name}'`,
});

/**
 * The registry over the local models; `upstream` (the gateway's embedding models, added by
 * `withUpstream` once the gateway exists) serves the other names.
 */
export function createEmbeddingRegistry(options: RegistryOptions, upstream?: UpstreamEmbeddings): EmbeddingRegistry {
  const fromLocal = (id: string, requested: string): Resolution => {
    const entry = options.local.get(id);
    if (entry === undefined) return unknown(requested);
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
    async resolve(name, resolveOptions = {}) {
      if (options.local.has(name)) return fromLocal(name, name);
      const served = await upstream?.find(name, resolveOptions.measure ?? true);
      if (served) return { ok: true, model: served, requested: name };
      // A provider whose model list is unknown may serve this name: answering with the local
      // model (or not at all) now would give another model's vectors than the next call does.
      const unlisted = (await upstream?.unlisted()) ?? [];
      if (unlisted.length > 0) {
        return {
          ok: false,
          reason: 'unavailable',
          message: `Embedding model '${name}' is unavailable: the model list of provider ${unlisted.join(', ')} could not be read, and it may serve '${name}'; retry later`,
        };
      }
      if (!openAiEmbeddingNames.includes(name)) return unknown(name);
      return fromLocal(options.defaultLocal, name);
    },
    async forCollection({ provider, model, dimensions }) {
      if (provider === 'local') return fromLocal(model, model);
      const served = await upstream?.forCollection(model, dimensions);
      if (served) return { ok: true, model: served, requested: model };
      return {
        ok: false,
        reason: 'unavailable',
        message: `Embedding model '${model}' is served by no configured provider (it was '${provider}' when the collection was created)`,
      };
    },
    status() {
      return [...options.local].map(([name, entry]) => ({
        name,
        ok: !(entry instanceof Error),
        detail: entry instanceof Error ? entry.message : 'loaded',
      }));
    },
    withUpstream: (next) => createEmbeddingRegistry(options, next),
    async close() {
      const closing: Promise<void>[] = [];
      for (const entry of options.local.values()) {
        if (!(entry instanceof Error) && entry.close) closing.push(entry.close());
      }
      await Promise.all(closing);
    },
  };
}
