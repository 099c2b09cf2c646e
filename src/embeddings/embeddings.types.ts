/** A model that turns texts into vectors: the local ONNX models and upstream providers alike. */
export interface EmbeddingModel {
  /** The model that really computes the vectors, e.g. sentence-transformers/all-MiniLM-L6-v2. */
  readonly name: string;
  /** `local`, or the upstream provider's name. */
  readonly provider: string;
  readonly dimensions: number;
  /** Longest input in tokens; longer inputs are truncated by the model. */
  readonly maxTokens: number;
  /**
   * Vectors in input order: unit length from local models, as the provider sends them from
   * upstream ones (search compares by cosine, which does not need unit length).
   * `priority: 'interactive'` (a search query, an API call) jumps ahead of queued bulk ingestion
   * batches.
   */
  embed(texts: readonly string[], options?: EmbedOptions): Promise<EmbeddingResult>;
  /** Tokens per text as the model counts them, without special tokens. */
  countTokens(texts: readonly string[]): Promise<number[]>;
  /** Releases what the model holds (local models: their threads, once idle); later calls fail. */
  close?(): Promise<void>;
}

export interface EmbedOptions {
  priority?: 'interactive' | 'bulk';
  signal?: AbortSignal;
  /** Texts are search queries (some models want a query instruction prefix). */
  asQuery?: boolean;
  /**
   * The key this work is done for: upstream models count their tokens against it in the usage
   * tables (the uploader's key for ingestion, the searching key for queries). Local models ignore it.
   */
  keyId?: string;
  /**
   * Vectors of this length, asked of an upstream model's provider (`/embeddings`' `dimensions`);
   * local models take no such option.
   */
  dimensions?: number;
  /**
   * Request fields passed on unchanged to an upstream model's provider (`user`, and fields
   * ragport does not know); local models ignore them.
   */
  extra?: Record<string, unknown>;
}

export interface EmbeddingResult {
  vectors: Float32Array[];
  promptTokens: number;
}

/** Where tokens are counted per key (the usage recorder). */
export interface UsageSink {
  record(entry: { keyId: string; model: string; promptTokens: number; completionTokens: number }): void;
}
