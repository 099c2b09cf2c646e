import { AppError } from '../errors.ts';
import type { EmbeddingBackend } from '../gateway/embeddings.ts';
import { counterFor } from '../gateway/tokens.ts';
import type { EmbeddingModel, UsageSink } from './embeddings.types.ts';

/** The upstream side of the embedding registry: the gateway's providers serving embedding models. */
export interface UpstreamEmbeddings {
  /**
   * The model a provider serves under `name` (aliases resolved), its dimensions measured by one
   * probe call the first time this process uses it (with `measure`; else as known, 0 when not yet,
   * and its vectors only held to each other); undefined when no provider serves it.
   */
  find(name: string, measure?: boolean): Promise<EmbeddingModel | undefined>;
  /** The model a collection recorded, its vectors held to the collection's dimensions. */
  forCollection(name: string, dimensions: number): Promise<EmbeddingModel | undefined>;
  /** Providers whose model list could not be read yet: they may serve a name not found. */
  unlisted(): Promise<string[]>;
}

export interface UpstreamEmbeddingsDeps {
  /** The gateway's embedding backends (batching, retries, failover, breakers). */
  backends: (model: string) => Promise<EmbeddingBackend | undefined>;
  /** The model name an alias stands for. */
  target: (model: string) => string;
  /** The provider first in line for a model, recorded by collections as `embedding_provider`. */
  providerOf: (model: string) => Promise<string | undefined>;
  unlisted: () => Promise<string[]>;
  /** Where tokens embedded for a key (`EmbedOptions.keyId`) are counted. */
  usage: UsageSink;
}

/**
 * Providers do not say how long an input may be. OpenAI's embedding models take 8,191 tokens;
 * chunks are far shorter (CHUNK_TOKENS), so this only bounds a title prepended to a chunk.
 */
const UPSTREAM_MAX_TOKENS = 8_191;
const PROBE = 'ragport dimension probe';

/** Rejections name the model, so a failed document and a failed search say what was being done. */
function inContext(error: unknown, model: string): unknown {
  if (!(error instanceof AppError)) return error;
  return new AppError({
    code: error.code,
    message: `Embedding model '${model}': ${error.message}`,
    ...(error.param === undefined ? {} : { param: error.param }),
    ...(error.upstream ? { upstream: error.upstream } : {}),
    ...(error.headers ? { headers: error.headers } : {}),
    cause: error,
  });
}

function upstreamModel(
  backend: EmbeddingBackend,
  provider: string,
  dimensions: number,
  usage: UsageSink,
): EmbeddingModel {
  const name = backend.model;
  return {
    name,
    provider,
    dimensions,
    maxTokens: UPSTREAM_MAX_TOKENS,
    async embed(texts, options = {}) {
      const result = await backend
        .embed([...texts], options.signal, {
          ...(options.dimensions === undefined ? {} : { dimensions: options.dimensions }),
          ...(options.extra === undefined ? {} : { extra: options.extra }),
        })
        .catch((error: unknown) => {
          throw inContext(error, name);
        });
      // Dimensions not measured (a relayed /embeddings call): the vectors held to each other.
      const wanted = options.dimensions ?? (dimensions > 0 ? dimensions : (result.vectors[0]?.length ?? 0));
      if (wanted === 0 && result.vectors.length > 0) {
        throw new AppError({
          code: 'upstream_error',
          message: `Embedding model '${name}': the provider returned an empty vector`,
        });
      }
      const wrong = result.vectors.find((v) => v.length !== wanted);
      if (wrong !== undefined) {
        // Another provider of the same name, or the same one serving another model now: the vectors
        // cannot be compared with the collection's, so nothing is stored or searched with them.
        throw new AppError({
          code: 'upstream_error',
          message:
            options.dimensions === undefined
              ? `Embedding model '${name}': the provider returned ${wrong.length}-dimensional vectors, not the ${dimensions} this model was fixed to`
              : `Embedding model '${name}': the provider returned ${wrong.length}-dimensional vectors, not the ${wanted} asked for`,
        });
      }
      if (options.keyId !== undefined) {
        usage.record({ keyId: options.keyId, model: name, promptTokens: result.promptTokens, completionTokens: 0 });
      }
      // As the provider sends them, not normalised: cosine similarity does not need unit length.
      return { vectors: result.vectors.map((v) => Float32Array.from(v)), promptTokens: result.promptTokens };
    },
    // The provider's tokenizer is unknown; o200k_base counts close to OpenAI's and is only used
    // to size chunks, well inside any embedding model's window.
    async countTokens(texts) {
      const count = await counterFor(texts);
      return texts.map((t) => count(t));
    },
  };
}

/**
 * Upstream embedding models as `EmbeddingModel`s: the same interface as the local ones, so
 * collections, ingestion and search never ask where a vector comes from.
 */
export function createUpstreamEmbeddings(deps: UpstreamEmbeddingsDeps): UpstreamEmbeddings {
  // Per target, its dimensions once measured, or the probe under way. A failed probe is
  // forgotten, so the next creation asks again.
  const dimensionsByTarget = new Map<string, number | Promise<number>>();
  const dimensionsOf = async (backend: EmbeddingBackend): Promise<number> => {
    const target = deps.target(backend.model);
    const known = dimensionsByTarget.get(target);
    if (known !== undefined) return known;
    const probe = backend.embed([PROBE]).then(
      ({ vectors }) => {
        const length = vectors[0]?.length ?? 0;
        if (length > 0) {
          dimensionsByTarget.set(target, length);
          return length;
        }
        dimensionsByTarget.delete(target);
        throw new AppError({
          code: 'upstream_error',
          message: `Embedding model '${backend.model}': the provider returned an empty vector`,
        });
      },
      (error: unknown) => {
        dimensionsByTarget.delete(target);
        throw inContext(error, backend.model);
      },
    );
    dimensionsByTarget.set(target, probe);
    return probe;
  };
  /** Dimensions measured so far, 0 for a model not (yet) measured: a model found without measuring. */
  const measuredDimensions = (target: string): number => {
    const known = dimensionsByTarget.get(target);
    return typeof known === 'number' ? known : 0;
  };

  const build = async (name: string, dimensions?: number, measure = true): Promise<EmbeddingModel | undefined> => {
    const target = deps.target(name);
    const backend = await deps.backends(target);
    if (backend === undefined) return undefined;
    const provider = (await deps.providerOf(target)) ?? 'upstream';
    const known = dimensions ?? (measure ? await dimensionsOf(backend) : measuredDimensions(target));
    return upstreamModel(backend, provider, known, deps.usage);
  };

  return {
    find: (name, measure = true) => build(name, undefined, measure),
    forCollection: (name, dimensions) => build(name, dimensions),
    unlisted: deps.unlisted,
  };
}
