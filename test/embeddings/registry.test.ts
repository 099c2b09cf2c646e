import { describe, expect, it } from 'vitest';
import type { EmbeddingModel } from '../../src/embeddings/embeddings.types.ts';
import { createEmbeddingRegistry } from '../../src/embeddings/registry.ts';
import type { UpstreamEmbeddings } from '../../src/embeddings/upstream.model.ts';

/** Which model a name means: the order of the one registry, without a model or a provider. */

const model = (name: string, provider: string, dimensions: number): EmbeddingModel => ({
  name,
  provider,
  dimensions,
  maxTokens: 256,
  embed: () => Promise.resolve({ vectors: [], promptTokens: 0 }),
  countTokens: (texts) => Promise.resolve(texts.map(() => 1)),
});

const local = model('local/minilm', 'local', 384);
const served = new Map([
  ['text-embedding-3-small', 1536],
  ['local/minilm', 999],
]);

function upstream(unlisted: string[] = []): UpstreamEmbeddings {
  return {
    find: (name) => {
      const dimensions = served.get(name);
      return Promise.resolve(dimensions === undefined ? undefined : model(name, 'openai', dimensions));
    },
    forCollection: (name, dimensions) =>
      Promise.resolve(served.has(name) ? model(name, 'openai', dimensions) : undefined),
    unlisted: () => Promise.resolve(unlisted),
  };
}

const registry = createEmbeddingRegistry({ local: new Map([['local/minilm', local]]), defaultLocal: 'local/minilm' });

const resolvedTo = async (r: ReturnType<typeof registry.resolve>) => {
  const resolution = await r;
  return resolution.ok
    ? { name: resolution.model.name, provider: resolution.model.provider, dimensions: resolution.model.dimensions }
    : resolution;
};

describe('the embedding registry', () => {
  it('a local name is the local model even where a provider serves the same name', async () => {
    expect(await resolvedTo(registry.withUpstream(upstream()).resolve('local/minilm'))).toEqual({
      name: 'local/minilm',
      provider: 'local',
      dimensions: 384,
    });
  });

  it('an OpenAI name is the provider’s model when one serves it, else the local default', async () => {
    const both = registry.withUpstream(upstream());
    expect(await resolvedTo(both.resolve('text-embedding-3-small'))).toEqual({
      name: 'text-embedding-3-small',
      provider: 'openai',
      dimensions: 1536,
    });
    expect(await resolvedTo(both.resolve('text-embedding-ada-002'))).toMatchObject({ name: 'local/minilm' });
    expect(await resolvedTo(registry.resolve('text-embedding-3-small'))).toMatchObject({ provider: 'local' });
  });

  it('while a provider’s model list is unknown, a name found nowhere is unavailable, not the local model', async () => {
    const unsure = registry.withUpstream(upstream(['openai']));
    expect(await unsure.resolve('text-embedding-ada-002')).toMatchObject({ ok: false, reason: 'unavailable' });
    expect(await unsure.resolve('no-such-model')).toMatchObject({ ok: false, reason: 'unavailable' });
    expect(await registry.withUpstream(upstream()).resolve('no-such-model')).toEqual({
      ok: false,
      reason: 'unknown',
      message: "Unknown embedding model 'no-such-model'",
    });
  });

  it('a collection gets the model it recorded, upstream ones held to its dimensions', async () => {
    const both = registry.withUpstream(upstream());
    expect(await resolvedTo(both.forCollection({ provider: 'local', model: 'local/minilm', dimensions: 384 }))).toEqual(
      { name: 'local/minilm', provider: 'local', dimensions: 384 },
    );
    expect(
      await resolvedTo(both.forCollection({ provider: 'azure', model: 'text-embedding-3-small', dimensions: 256 })),
    ).toEqual({ name: 'text-embedding-3-small', provider: 'openai', dimensions: 256 });
    expect(
      await registry.forCollection({ provider: 'azure', model: 'text-embedding-3-small', dimensions: 256 }),
    ).toEqual({
      ok: false,
      reason: 'unavailable',
      message:
        "Embedding model 'text-embedding-3-small' is served by no configured provider (it was 'azure' when the collection was created)",
    });
  });
});
