/** The ways of running the local model that the embedding benches compare (src/embeddings/local.model.ts). */
export const embeddingVariants = [
  // The batch-dependent way of b2807fa, kept for comparison.
  { name: 'q8 padded', dtype: 'q8', batching: 'padded' },
  { name: 'q8 alone', dtype: 'q8', batching: 'alone' },
  { name: 'fp32 padded', dtype: 'fp32', batching: 'padded' },
] as const;
