import { z } from 'zod';

export const MAX_INPUTS = 2048;
export const MAX_TOTAL_CHARS = 4_000_000;

export const embeddingsBody = z.object({
  model: z
    .string()
    .min(1)
    .max(200)
    .meta({ example: 'text-embedding-ada-002', description: 'A local model, an alias, or a model an upstream serves' }),
  input: z.union([
    z.string().min(1, 'input must not be empty'),
    z
      .array(z.string().min(1, 'input strings must not be empty'))
      .min(1, 'input must not be empty')
      .max(MAX_INPUTS, `at most ${MAX_INPUTS} inputs per request`),
  ]),
  encoding_format: z.enum(['float', 'base64']).default('float'),
  user: z.string().optional(),
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
