/**
 * A local embedding model on a thread of its own. ONNX Runtime's Node binding runs a session
 * synchronously on the calling thread (its `run` is a setImmediate around the native call): on
 * the server's thread every chunk embedded held every request for its ≈15 ms, and tokenising a
 * long document held it longer. Here the tokenizer and the sessions live on this thread and
 * answer `local.model.ts` by messages.
 */
import { parentPort, workerData } from 'node:worker_threads';
import {
  AutoModel,
  AutoTokenizer,
  env,
  type PreTrainedModel,
  type PreTrainedTokenizer,
  type Tensor,
} from '@huggingface/transformers';
import { createIdleCollector } from '../threads/idle-gc.ts';
import { lowerThreadPriority } from '../threads/niceness.ts';

export interface ModelCard {
  pooling: 'mean' | 'cls';
  maxTokens: number;
  queryPrefix: string;
}

export interface ThreadOptions {
  id: string;
  modelsDir: string | undefined;
  cacheDir: string;
  dtype: 'fp32' | 'q8';
  /** ONNX Runtime intra-op threads of the main session. */
  threads: number;
  /** Also a single-threaded session for batches of a few tokens (search queries). */
  smallSession: boolean;
  /**
   * Scheduling niceness of this thread and of ONNX Runtime's threads it starts (Linux): the bulk
   * lane runs at 10, so that the database, the event loop and queries get a core when they need
   * one and ingestion has the rest.
   */
  niceness: number;
  card: ModelCard;
}

export type ThreadRequest =
  | { id: number; op: 'embed'; texts: string[]; batching: 'alone' | 'padded' }
  | { id: number; op: 'count'; texts: string[] };

export type ThreadMessage =
  | { ready: true; dimensions: number }
  | { failed: string }
  | { id: number; ok: true; vectors?: Float32Array[]; tokenCounts: number[] }
  | { id: number; ok: false; message: string };

if (!parentPort) throw new Error('local.worker.ts runs as a worker thread');
const port = parentPort;
const options = workerData as ThreadOptions;
const { card } = options;

/** Batches up to this many token positions (padding included) run on the single-threaded session. */
const SMALL_BATCH_TOKENS = 128;

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

env.allowRemoteModels = options.modelsDir === undefined;
env.allowLocalModels = options.modelsDir !== undefined;
if (options.modelsDir !== undefined) env.localModelPath = options.modelsDir;
env.cacheDir = options.cacheDir;

const session = (intraOpNumThreads: number) =>
  AutoModel.from_pretrained(options.id, {
    dtype: options.dtype,
    device: 'cpu',
    session_options: { intraOpNumThreads, interOpNumThreads: 1 },
  });

let tokenizer: PreTrainedTokenizer;
let model: PreTrainedModel;
let small: PreTrainedModel;
// Before loading, which takes a core for a second or more: the bulk lane starts when the first
// document needs it, while requests are being served (threads inherit their creator's niceness).
lowerThreadPriority(options.niceness);
try {
  tokenizer = await AutoTokenizer.from_pretrained(options.id);
  model = await session(options.threads);
  // A search query is a handful of tokens: splitting it across threads costs more in hand-offs
  // than it saves (and competes with the database for the cores).
  small = options.smallSession && options.threads > 1 ? await session(1) : model;
} catch (error) {
  port.postMessage({ failed: (error as Error).message } satisfies ThreadMessage);
  port.close();
  throw error;
}

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

const collector = createIdleCollector();
port.on('message', (request: ThreadRequest) => {
  collector.busy();
  const work: Promise<{ vectors?: Float32Array[]; tokenCounts: number[] }> =
    request.op === 'count'
      ? Promise.resolve({
          tokenCounts: request.texts.map((t) => tokenizer.encode(t, { add_special_tokens: false }).length),
        })
      : (request.batching === 'alone' ? runAlone : runPadded)(request.texts);
  work.then(
    (result) => {
      port.postMessage(
        { id: request.id, ok: true, ...result } satisfies ThreadMessage,
        (result.vectors ?? []).map((v) => v.buffer as ArrayBuffer),
      );
    },
    (error: unknown) =>
      port.postMessage({ id: request.id, ok: false, message: (error as Error).message } satisfies ThreadMessage),
  );
  void work.finally(() => collector.idle()).catch(() => undefined);
});
collector.busy(); // loading the model made garbage too
collector.idle();

port.postMessage({
  ready: true,
  dimensions: (model.config as unknown as { hidden_size: number }).hidden_size,
} satisfies ThreadMessage);
