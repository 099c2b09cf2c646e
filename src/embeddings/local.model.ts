import { availableParallelism } from 'node:os';
import {
  AutoModel,
  AutoTokenizer,
  env,
  type PreTrainedModel,
  type PreTrainedTokenizer,
  type Tensor,
} from '@huggingface/transformers';
import { createBatcher } from './batcher.ts';
import type { EmbeddingModel } from './embeddings.types.ts';

/** What transformers.js cannot tell from a model's files: how sentence vectors are pooled. */
interface ModelCard {
  pooling: 'mean' | 'cls';
  maxTokens: number;
  queryPrefix: string;
}

const cards: Record<string, ModelCard> = {
  'sentence-transformers/all-MiniLM-L6-v2': { pooling: 'mean', maxTokens: 256, queryPrefix: '' },
  'sentence-transformers/all-MiniLM-L12-v2': { pooling: 'mean', maxTokens: 256, queryPrefix: '' },
  'BAAI/bge-small-en-v1.5': {
    pooling: 'cls',
    maxTokens: 512,
    queryPrefix: 'Represent this sentence for searching relevant passages: ',
  },
  'BAAI/bge-base-en-v1.5': {
    pooling: 'cls',
    maxTokens: 512,
    queryPrefix: 'Represent this sentence for searching relevant passages: ',
  },
};

export interface LocalModelOptions {
  id: string;
  /** Read weights from here (air-gapped installs); without it they come from the model hub. */
  modelsDir: string | undefined;
  /** Where hub downloads are cached. */
  cacheDir: string;
  dtype: 'fp32' | 'q8';
  threads?: number;
  maxBatch?: number;
  /**
   * How the texts of a batch share an inference run. `padded`: one run over the batch padded to its
   * longest text; `alone`: one run per text, unpadded. The int8 model quantizes its activations
   * dynamically over the whole input tensor, so batched q8 vectors depend on their companions
   * (cosine ~0.99); it runs texts alone, which costs nothing on a few cores (bench/embed). fp32
   * batches are exact up to float rounding. Default: `alone` for q8, `padded` for fp32.
   */
  batching?: 'alone' | 'padded';
}

export class ModelUnavailableError extends Error {}

/** Mean over real tokens (attention mask 1), or the [CLS] vector; then unit length. */
function pool(hidden: Tensor, mask: Tensor, pooling: ModelCard['pooling']): Float32Array[] {
  const [batch = 0, seq = 0, dim = 0] = hidden.dims;
  const data = hidden.data as Float32Array;
  const maskData = mask.data as BigInt64Array;
  const out: Float32Array[] = [];
  for (let b = 0; b < batch; b++) {
    const v = new Float32Array(dim);
    if (pooling === 'cls') {
      v.set(data.subarray(b * seq * dim, b * seq * dim + dim));
    } else {
      let n = 0;
      for (let t = 0; t < seq; t++) {
        if (maskData[b * seq + t] === 0n) continue;
        n++;
        const offset = (b * seq + t) * dim;
        for (let d = 0; d < dim; d++) v[d] = (v[d] as number) + (data[offset + d] as number);
      }
      if (n > 0) for (let d = 0; d < dim; d++) v[d] = (v[d] as number) / n;
    }
    let norm = 0;
    for (let d = 0; d < dim; d++) norm += (v[d] as number) ** 2;
    norm = Math.sqrt(norm) || 1;
    for (let d = 0; d < dim; d++) v[d] = (v[d] as number) / norm;
    out.push(v);
  }
  return out;
}

/**
 * transformers.js truncates by cutting the end of the sequence, [SEP] included; the model (and
 * sentence-transformers) expect truncated content followed by [SEP]. Put it back.
 */
function restoreSeparator(ids: Tensor, mask: Tensor, sepId: number | undefined): void {
  if (sepId === undefined) return;
  const [batch = 0, seq = 0] = ids.dims;
  const idData = ids.data as BigInt64Array;
  const maskData = mask.data as BigInt64Array;
  const sep = BigInt(sepId);
  for (let b = 0; b < batch; b++) {
    const last = b * seq + seq - 1;
    if (maskData[last] === 1n && idData[last] !== sep) idData[last] = sep;
  }
}

/**
 * A sentence-embedding model run in-process by ONNX Runtime. Inference runs on ORT's own threads,
 * one batch at a time (more would only oversubscribe the cores), fed by a priority batcher.
 */
/** Batches up to this many token positions (padding included) run on the single-threaded session. */
const SMALL_BATCH_TOKENS = 128;

export async function loadLocalModel(options: LocalModelOptions): Promise<EmbeddingModel> {
  env.allowRemoteModels = options.modelsDir === undefined;
  env.allowLocalModels = options.modelsDir !== undefined;
  if (options.modelsDir !== undefined) env.localModelPath = options.modelsDir;
  env.cacheDir = options.cacheDir;

  const card = cards[options.id] ?? { pooling: 'mean', maxTokens: 256, queryPrefix: '' };
  let tokenizer: PreTrainedTokenizer;
  let model: PreTrainedModel;
  let small: PreTrainedModel;
  const threads = options.threads ?? availableParallelism();
  const session = (intraOpNumThreads: number) =>
    AutoModel.from_pretrained(options.id, {
      dtype: options.dtype,
      device: 'cpu',
      session_options: { intraOpNumThreads, interOpNumThreads: 1 },
    });
  try {
    tokenizer = await AutoTokenizer.from_pretrained(options.id);
    model = await session(threads);
    // A search query is a handful of tokens: splitting it across threads costs more in hand-offs
    // than it saves (and competes with the database for the cores), so small batches get a
    // single-threaded session of the same weights.
    small = threads > 1 ? await session(1) : model;
  } catch (error) {
    const where = options.modelsDir === undefined ? 'the model hub' : `MODELS_DIR (${options.modelsDir})`;
    throw new ModelUnavailableError(
      `Embedding model ${options.id} (${options.dtype}) could not be loaded from ${where}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  const dimensions = (model.config as unknown as { hidden_size: number }).hidden_size;

  const countTokens = async (texts: readonly string[]) =>
    texts.map((t) => tokenizer.encode(t, { add_special_tokens: false }).length);

  const runPadded = async (texts: string[]) => {
    const inputs = tokenizer(texts, { padding: true, truncation: true, max_length: card.maxTokens });
    restoreSeparator(inputs.input_ids, inputs.attention_mask, tokenizer.sep_token_id);
    const mask = inputs.attention_mask;
    const [batch = 0, seq = 0] = mask.dims;
    const output = (await (batch * seq <= SMALL_BATCH_TOKENS ? small : model)(inputs)) as { last_hidden_state: Tensor };
    const maskData = mask.data as BigInt64Array;
    // Special tokens ([CLS], [SEP]) are not the caller's tokens.
    const tokenCounts = texts.map(
      (_, b) => maskData.subarray(b * seq, (b + 1) * seq).reduce((n, x) => n + Number(x), 0) - 2,
    );
    return { vectors: pool(output.last_hidden_state, mask, card.pooling), tokenCounts };
  };

  const runAlone = async (texts: string[]) => {
    const vectors: Float32Array[] = [];
    const tokenCounts: number[] = [];
    for (const text of texts) {
      const one = await runPadded([text]);
      vectors.push(one.vectors[0] as Float32Array);
      tokenCounts.push(one.tokenCounts[0] as number);
    }
    return { vectors, tokenCounts };
  };
  const batching = options.batching ?? (options.dtype === 'q8' ? 'alone' : 'padded');

  const batcher = createBatcher(batching === 'alone' ? runAlone : runPadded, { maxBatch: options.maxBatch ?? 32 });

  return {
    name: options.id,
    provider: 'local',
    dimensions,
    maxTokens: card.maxTokens,
    countTokens,
    embed: (texts, embedOptions = {}) =>
      batcher.run(
        embedOptions.asQuery && card.queryPrefix ? texts.map((t) => card.queryPrefix + t) : [...texts],
        embedOptions.priority ?? 'interactive',
        embedOptions.signal,
      ),
  };
}
