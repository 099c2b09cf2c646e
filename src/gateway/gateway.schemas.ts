import { z } from 'zod';

const contentPart = z.object({ type: z.string() }).loose();

/** One message as OpenAI accepts it; fields we do not interpret (tool_calls, name...) pass through. */
export const chatMessage = z
  .object({
    role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
    content: z.union([z.string(), z.array(contentPart), z.null()]).optional(),
  })
  .loose();

/**
 * The request body. Only what ragport interprets is checked; everything else (tools,
 * tool_choice, response_format, stop, seed, top_p, penalties, logprobs, user...) is forwarded.
 */
export const chatCompletionRequest = z
  .object({
    model: z.string().min(1).describe('A model id from GET /api/v1/models (or an alias)'),
    messages: z.array(chatMessage).min(1),
    temperature: z.number().min(0).max(2).nullish(),
    max_tokens: z.number().int().positive().nullish(),
    max_completion_tokens: z.number().int().positive().nullish(),
    stream: z.boolean().nullish().describe('true: text/event-stream of chat.completion.chunk events, then [DONE]'),
    stream_options: z.object({ include_usage: z.boolean().optional() }).loose().nullish(),
  })
  .loose();
export type ChatCompletionRequest = z.infer<typeof chatCompletionRequest>;

/** For the docs: the body is the upstream's own, passed through unchanged. */
export const chatCompletionResponse = z
  .object({
    id: z.string(),
    object: z.literal('chat.completion'),
    created: z.number().int(),
    model: z.string(),
    choices: z.array(
      z
        .object({
          index: z.number().int(),
          message: z.object({ role: z.string(), content: z.string().nullable() }).loose(),
          finish_reason: z.string().nullable(),
        })
        .loose(),
    ),
    usage: z
      .object({ prompt_tokens: z.number().int(), completion_tokens: z.number().int(), total_tokens: z.number().int() })
      .loose()
      .optional(),
  })
  .loose()
  .describe('A chat.completion; with stream: true, a text/event-stream of chat.completion.chunk events instead');

export const modelEntry = z.object({
  id: z.string(),
  object: z.literal('model'),
  created: z.number().int(),
  owned_by: z.string().describe('The provider serving the model'),
});

export const modelList = z.object({ object: z.literal('list'), data: z.array(modelEntry) });
