import { boolean, doublePrecision, index, integer, pgTable, text, jsonb } from '../orm.ts';
import { createdAt, updatedAt } from '../columns.ts';

/** A chatbot configuration, owned by the API key that created it. */
export const chatbots = pgTable(
  'chatbots',
  {
    id: text('id').primaryKey(),
    /** The key that created it: only that key (or an admin) sees and uses it. */
    ownerKeyId: text('owner_key_id').notNull(),
    name: text('name').notNull(),
    chatbotType: text('chatbot_type').notNull(),
    model: text('model').notNull(),
    /** Null: the default prompt of `chatbot_type`, decided when the chatbot answers. */
    systemPrompt: text('system_prompt'),
    useRag: boolean('use_rag').notNull(),
    /** A collection name, checked against the caller's access on every use. */
    ragCollection: text('rag_collection'),
    ragTopK: integer('rag_top_k').notNull(),
    ragSimilarityThreshold: doublePrecision('rag_similarity_threshold').notNull(),
    /** Rerank the fused candidates with this model before the top k (null: no rerank stage). */
    ragRerank: jsonb('rag_rerank').$type<{ model: string; candidates: number }>(),
    memoryLength: integer('memory_length').notNull(),
    temperature: doublePrecision('temperature').notNull(),
    maxTokens: integer('max_tokens').notNull(),
    fallbackResponses: text('fallback_responses').array().notNull(),
    /** Fallbacks handed out so far: the next one is `fallback_responses[cursor % length]` on every instance. */
    fallbackCursor: integer('fallback_cursor').notNull().default(0),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index('chatbots_owner_created_idx').on(t.ownerKeyId, t.createdAt)],
);

export type ChatbotRow = typeof chatbots.$inferSelect;
