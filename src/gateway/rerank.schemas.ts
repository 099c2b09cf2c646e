import { z } from 'zod';

export const MAX_RERANK_DOCUMENTS = 1000;

/**
 * A rerank request as Cohere (v1 and v2), Jina, vLLM and LiteLLM clients send it. Fields ragport
 * does not interpret (`rank_fields`, `max_chunks_per_doc`, `max_tokens_per_doc`) are accepted and
 * ignored.
 */
export const rerankBody = z
  .object({
    model: z.string().min(1).max(200).meta({ example: 'rerank-english-v3.0' }),
    query: z.string().min(1, 'query must not be empty').max(100_000),
    documents: z
      .array(
        z.union(
          [
            z.string(),
            z
              .looseObject({ text: z.string() })
              .describe('A document object: `text` is what is ranked; other fields are returned as given'),
          ],
          { error: 'each document is a string or an object with a string `text`' },
        ),
      )
      .min(1, 'documents must not be empty')
      .max(MAX_RERANK_DOCUMENTS, `at most ${MAX_RERANK_DOCUMENTS} documents per request`),
    // null, as Cohere's SDK sends for an argument given as None, means the default.
    top_n: z.number().int().min(1).nullish().describe('How many results, best first (default: all documents)'),
    return_documents: z
      .boolean()
      .nullish()
      .default(true)
      .describe("Include each result's document (as `{text, ...}`); default true"),
  })
  .loose();
export type RerankBody = z.infer<typeof rerankBody>;

export const rerankResponse = z.object({
  id: z.string(),
  model: z.string(),
  results: z.array(
    z.object({
      index: z.number().int().describe('Position of the document in the request'),
      relevance_score: z.number(),
      document: z.looseObject({ text: z.string() }).optional(),
    }),
  ),
  usage: z.object({ total_tokens: z.number().int() }),
  meta: z.object({
    billed_units: z.object({ search_units: z.number().int() }),
    tokens: z.object({ input_tokens: z.number().int(), output_tokens: z.number().int() }),
  }),
});
export type RerankResponse = z.infer<typeof rerankResponse>;
