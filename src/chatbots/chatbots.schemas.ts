import { z } from 'zod';
import { chatCompletionRequest, chatCompletionResponse } from '../gateway/gateway.schemas.ts';

/**
 * Similarity threshold of a chatbot's retrieval when none is given. Lower than rag_search's 0.5:
 * with the default local model (MiniLM) questions score 0.4–0.8 against passages that answer them
 * and under 0.3 against unrelated ones, so 0.5 would drop good context.
 */
export const DEFAULT_SIMILARITY_THRESHOLD = 0.3;

const fields = {
  name: z.string().trim().min(1).max(200),
  chatbot_type: z
    .string()
    .trim()
    .min(1)
    .max(64)
    .describe('assistant, support, sales or any other kind; selects the default system prompt'),
  model: z.string().min(1).max(200).describe('A chat model from GET /api/v1/models (or an alias)'),
  system_prompt: z
    .string()
    .max(100_000)
    .nullable()
    .describe("Instructions for the model; null or empty: the default prompt of the chatbot's type"),
  use_rag: z.boolean(),
  rag_collection: z.string().min(1).max(200).nullable().describe('Name of the collection searched'),
  rag_top_k: z.number().int().min(1).max(50),
  rag_similarity_threshold: z
    .number()
    .min(-1)
    .max(1)
    .describe('Minimum cosine similarity of a retrieved chunk to the query'),
  rag_rerank: z
    .object({
      model: z.string().min(1).max(200).describe('A rerank model from a provider (POST /api/v1/rerank)'),
      candidates: z.number().int().min(1).max(200).default(50).describe('Fused candidates the reranker orders'),
    })
    .nullable()
    .describe('Opt-in rerank stage after fusion; null for none'),
  memory_length: z.number().int().min(0).max(100).describe('Previous messages sent back to the model as context'),
  temperature: z.number().min(0).max(2),
  max_tokens: z.number().int().min(1).max(1_000_000),
  fallback_responses: z
    .array(z.string().min(1).max(10_000))
    .max(100)
    .describe('Answers given in turn when the model provider fails'),
};

export const createChatbotBody = z.object({
  name: fields.name,
  model: fields.model,
  chatbot_type: fields.chatbot_type.default('assistant'),
  system_prompt: fields.system_prompt.optional(),
  use_rag: fields.use_rag.default(false),
  rag_collection: fields.rag_collection.optional(),
  rag_top_k: fields.rag_top_k.default(5),
  rag_similarity_threshold: fields.rag_similarity_threshold.default(DEFAULT_SIMILARITY_THRESHOLD),
  rag_rerank: fields.rag_rerank.default(null),
  memory_length: fields.memory_length.default(10),
  temperature: fields.temperature.default(0.7),
  max_tokens: fields.max_tokens.default(1000),
  fallback_responses: fields.fallback_responses.default([]),
});
export type CreateChatbotBody = z.infer<typeof createChatbotBody>;

export const updateChatbotBody = z.object(fields).partial();
export type UpdateChatbotBody = z.infer<typeof updateChatbotBody>;

export const chatbotRecord = z.object({
  id: z.string(),
  name: z.string(),
  chatbot_type: z.string(),
  model: z.string(),
  system_prompt: z.string().describe('The prompt in use: its own, or the default of its type'),
  use_rag: z.boolean(),
  rag_collection: z.string().nullable(),
  rag_top_k: z.number().int(),
  rag_similarity_threshold: z.number(),
  rag_rerank: z.object({ model: z.string(), candidates: z.number().int() }).nullable(),
  memory_length: z.number().int(),
  temperature: z.number(),
  max_tokens: z.number().int(),
  fallback_responses: z.array(z.string()),
  created_at: z.string(),
  updated_at: z.string(),
});
export type ChatbotRecord = z.infer<typeof chatbotRecord>;

export const chatbotList = z.object({ chatbots: z.array(chatbotRecord) });
export const chatbotParams = z.object({ chatbot_id: z.string().min(1).max(100) });
export const conversationParams = z.object({ conversation_id: z.string().min(1).max(100) });
export { message } from '../common.schemas.ts';

export const source = z.object({
  title: z.string().describe("The document's metadata.title, else its name"),
  content: z.string().describe('An excerpt of the retrieved chunk'),
  score: z.number().describe('Cosine similarity between the query and the chunk'),
  document_id: z.string(),
});
export type Source = z.infer<typeof source>;

export const chatBody = z.object({
  // Taken as sent: trimming cut the indentation of pasted code's first line.
  message: z
    .string()
    .max(200_000)
    .refine((text) => text.trim() !== '', { message: 'Must not be empty or whitespace only' })
    // Refused before the model is called: the turn could not be stored after it.
    .refine((text) => !text.includes('\u0000'), {
      message: 'Text with a NUL character (\\u0000) cannot be stored; remove it',
    }),
  conversation_id: z.string().min(1).max(100).nullish().describe('Omit to start a new conversation'),
});
export type ChatBody = z.infer<typeof chatBody>;

export const chatResponse = z.object({
  conversation_id: z.string(),
  response: z.string(),
  sources: z.array(source).optional().describe('Present when the chatbot uses retrieval'),
  timestamp: z.string().describe('When the reply was stored, ISO 8601 UTC'),
  chatbot_id: z.string(),
  fallback: z.boolean().describe('true: a configured fallback response, because the model provider failed'),
});
export type ChatResponse = z.infer<typeof chatResponse>;

export const chatbotCompletionRequest = chatCompletionRequest.extend({
  model: z.string().nullish().describe("Ignored: the chatbot's own model answers"),
});
export type ChatbotCompletionRequest = z.infer<typeof chatbotCompletionRequest>;

export const chatbotCompletionResponse = chatCompletionResponse
  .extend({ sources: z.array(source).optional() })
  .describe(
    'A chat.completion with `sources` when the chatbot retrieves; `finish_reason: "fallback"` marks a fallback response. With stream: true, chat.completion.chunk events, `sources` on the first',
  );

export const conversationSummary = z.object({
  id: z.string(),
  chatbot_id: z.string(),
  title: z.string().describe('The start of the first message'),
  message_count: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
});

export const conversationListQuery = z.object({
  page: z.coerce.number().int().min(1).default(1),
  page_size: z.coerce.number().int().min(1).max(100).default(20),
});

export const conversationList = z.object({
  conversations: z.array(conversationSummary),
  page: z.number().int(),
  page_size: z.number().int(),
  total: z.number().int(),
});

export const conversationMessage = z.object({
  id: z.string(),
  role: z.enum(['user', 'assistant']),
  content: z.string(),
  sources: z.array(source).nullable(),
  fallback: z.boolean(),
  timestamp: z.string(),
});

export const conversationDetail = conversationSummary.extend({ messages: z.array(conversationMessage) });
export type ConversationDetail = z.infer<typeof conversationDetail>;
