import { z } from 'zod';

export const MAX_INPUTS = 2048;
export const MAX_TOTAL_CHARS = 4_000_000;
/** Token ids in one request, all inputs together: OpenAI's own limit. */
export const MAX_TOTAL_TOKENS = 300_000;
/** Token ids in one input: the window of OpenAI's embedding models. */
export const MAX_INPUT_TOKENS = 8_192;
const MAX_DIMENSIONS = 16_384;

// Its length limits are checked where the ids are decoded (token-input.ts): inside the union a
// failed `.max` would be reported as the union's generic message.
const tokenArray = z.array(z.number().int().min(0)).min(1, 'a token array must not be empty');

const INPUT_SHAPE =
  'input is a string, an array of strings, or token ids (an array of integers, or an array of such arrays)';

/**
 * Inside the union a branch's own message is lost: an array that fails only by its length or an
 * empty string would get the generic sentence. Those say what is wrong (after `input: `).
 */
function inputError(input: unknown): string {
  if (Array.isArray(input)) {
    if (input.length === 0) return 'must not be empty';
    if (input.length > MAX_INPUTS) return `at most ${MAX_INPUTS} inputs per request (got ${input.length})`;
  }
  if (input === '') return 'must not be empty';
  return INPUT_SHAPE;
}

// Fields ragport does not interpret (`user`, a provider's own such as `input_type` or `task`) are
// kept: they are passed on to an upstream model's provider, as chat passes its own.
export const embeddingsBody = z.looseObject({
  model: z
    .string()
    .min(1)
    .max(200)
    .meta({ example: 'text-embedding-ada-002', description: 'A local model, an alias, or a model an upstream serves' }),
  input: z.union(
    [
      z.string().min(1, 'must not be empty'),
      z
        .array(z.string().min(1, 'must not be empty'))
        .min(1, 'must not be empty')
        .max(MAX_INPUTS, `at most ${MAX_INPUTS} inputs per request`),
      // Token ids (cl100k_base, as OpenAI's API takes them): one array, or one per input.
      tokenArray,
      z.array(tokenArray).min(1, 'must not be empty').max(MAX_INPUTS, `at most ${MAX_INPUTS} inputs per request`),
    ],
    { error: (issue) => inputError(issue.input) },
  ),
  // null, which clients that send every field of their request type send for one left unset, means the default.
  encoding_format: z.enum(['float', 'base64']).nullish().default('float'),
  dimensions: z
    .number()
    .int()
    .min(1)
    .max(MAX_DIMENSIONS)
    .nullish()
    .describe(
      "Length of the vectors: passed to an upstream model's provider (OpenAI's text-embedding-3 models shorten theirs); a local model takes only its own length",
    ),
  user: z.string().nullish(),
});
export type EmbeddingsBody = z.infer<typeof embeddingsBody>;

export const embeddingsResponse = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({
      object: z.literal('embedding'),
      embedding: z.union([z.array(z.number()), z.string()]),
      index: z.number().int(),
    }),
  ),
  model: z.string(),
  usage: z.object({ prompt_tokens: z.number().int(), total_tokens: z.number().int() }),
});
export type EmbeddingsResponse = z.infer<typeof embeddingsResponse>;
