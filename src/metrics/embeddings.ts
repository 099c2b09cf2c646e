import type { EmbeddingModel } from '../embeddings/embeddings.types.ts';
import type { EmbeddingRegistry, Resolution } from '../embeddings/registry.ts';
import type { Metrics } from './metrics.ts';

/**
 * The registry with every model it hands out counting what it embeds: texts and tokens by model,
 * provider and priority. The models themselves stay unaware of metrics.
 */
export function countEmbeddings(registry: EmbeddingRegistry, metrics: Pick<Metrics, 'embedded'>): EmbeddingRegistry {
  const counted = new WeakMap<EmbeddingModel, EmbeddingModel>();
  const wrap = (model: EmbeddingModel): EmbeddingModel => {
    let wrapped = counted.get(model);
    if (wrapped === undefined) {
      const embed: EmbeddingModel['embed'] = async (texts, options) => {
        const result = await model.embed(texts, options);
        metrics.embedded(
          model.name,
          model.provider,
          options?.priority ?? 'interactive',
          texts.length,
          result.promptTokens,
        );
        return result;
      };
      // Everything else is read through to the model itself.
      wrapped = Object.assign(Object.create(model) as EmbeddingModel, { embed });
      counted.set(model, wrapped);
    }
    return wrapped;
  };
  const counting = (resolution: Resolution): Resolution =>
    resolution.ok ? { ...resolution, model: wrap(resolution.model) } : resolution;
  return {
    ...registry,
    resolve: async (name, options) => counting(await registry.resolve(name, options)),
    forCollection: async (collection) => counting(await registry.forCollection(collection)),
    withUpstream: (upstream) => countEmbeddings(registry.withUpstream(upstream), metrics),
  };
}
