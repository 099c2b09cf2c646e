import { AppError } from '../errors.ts';
import type { Principal } from '../keys/principal.ts';
import { expectedTokens, type TokenQuota } from '../usage/quota.ts';
import type { EmbeddingsBody, EmbeddingsResponse } from './embeddings.schemas.ts';
import { MAX_TOTAL_CHARS } from './embeddings.schemas.ts';
import { inputTexts } from './token-input.ts';
import type { EmbeddingRegistry } from './registry.ts';
import type { UsageSink } from './embeddings.types.ts';

/** Little-endian float32, base64: what OpenAI sends for encoding_format=base64. */
function toBase64(vector: Float32Array): string {
  const bytes = Buffer.alloc(vector.length * 4);
  for (let i = 0; i < vector.length; i++) bytes.writeFloatLE(vector[i] as number, i * 4);
  return bytes.toString('base64');
}

/** Fields ragport sets itself when it calls an upstream: the rest of the request is passed on. */
const OWN_FIELDS = new Set(['model', 'input', 'encoding_format', 'dimensions']);

/** The request's fields for the upstream as sent (`user`, a provider's own), or none; a null `user` is left out. */
function passedOn(body: EmbeddingsBody): Record<string, unknown> | undefined {
  let extra: Record<string, unknown> | undefined;
  for (const [name, value] of Object.entries(body)) {
    if (OWN_FIELDS.has(name) || value === undefined || (name === 'user' && value === null)) continue;
    (extra ??= {})[name] = value;
  }
  return extra;
}

export interface EmbeddingsServiceDeps {
  registry: EmbeddingRegistry;
  usage: UsageSink;
  /** The monthly token quota, checked as chat checks it. */
  quota: Pick<TokenQuota, 'admitCall'>;
}

function respond(body: EmbeddingsBody, vectors: Float32Array[], promptTokens: number): EmbeddingsResponse {
  return {
    object: 'list',
    data: vectors.map((v, index) => ({
      object: 'embedding',
      embedding: body.encoding_format === 'base64' ? toBase64(v) : Array.from(v),
      index,
    })),
    model: body.model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}

export function createEmbeddingsService(deps: EmbeddingsServiceDeps) {
  return {
    async create(
      principal: Pick<Principal, 'keyId' | 'quota'>,
      body: EmbeddingsBody,
      signal: AbortSignal,
    ): Promise<{ response: EmbeddingsResponse; resolvedModel: string }> {
      const inputs = await inputTexts(body.input);
      const chars = inputs.reduce((n, s) => n + s.length, 0);
      if (chars > MAX_TOTAL_CHARS) {
        throw new AppError({
          code: 'invalid_value',
          message: `input is too large: at most ${MAX_TOTAL_CHARS} characters in total`,
          param: 'input',
        });
      }
      const resolved = await deps.registry.resolve(body.model, { measure: false });
      if (!resolved.ok) {
        throw new AppError({
          code: resolved.reason === 'unknown' ? 'model_not_found' : 'service_unavailable',
          message: resolved.message,
          param: 'model',
          // The model list or the model is read again meanwhile: the OpenAI SDKs wait this long.
          ...(resolved.reason === 'unknown' ? {} : { headers: { 'retry-after': '5' } }),
        });
      }
      const { model } = resolved;
      const dimensions = body.dimensions ?? undefined;
      if (dimensions !== undefined && model.provider === 'local' && dimensions !== model.dimensions) {
        throw new AppError({
          code: 'invalid_value',
          message: `Model '${body.model}' makes ${model.dimensions}-dimensional vectors and cannot shorten them: leave out dimensions, or pass ${model.dimensions}`,
          param: 'dimensions',
        });
      }
      // Local models cost tokens too: they count toward the quota, and are refused by it alike,
      // calls in flight included (ten at once each went through below a quota they all passed).
      const tokensPerMonth = principal.quota.tokensPerMonth;
      const release =
        tokensPerMonth === null
          ? () => undefined
          : await deps.quota.admitCall(principal.keyId, tokensPerMonth, expectedTokens(chars));
      // No keyId to the model: this route counts every request itself, local models' too, under
      // the name the client asked for.
      const upstream = model.provider !== 'local';
      const extra = upstream ? passedOn(body) : undefined;
      let embedded;
      try {
        embedded = await model.embed(inputs, {
          priority: 'interactive',
          signal,
          ...(dimensions !== undefined && upstream ? { dimensions } : {}),
          ...(extra === undefined ? {} : { extra }),
        });
        deps.usage.record({
          keyId: principal.keyId,
          model: body.model,
          promptTokens: embedded.promptTokens,
          completionTokens: 0,
        });
      } finally {
        release();
      }
      const { vectors, promptTokens } = embedded;
      return { resolvedModel: model.name, response: respond(body, vectors, promptTokens) };
    },
  };
}

export type EmbeddingsService = ReturnType<typeof createEmbeddingsService>;
