import { boolean, jsonb, integer, pgTable, text, timestamp, uniqueIndex } from '../orm.ts';
import { conversations } from './conversations.ts';

export type MessageRole = 'user' | 'assistant';

/** What an answer was based on, as the custom chat API returns it. */
export interface StoredSource {
  document_id: string;
  title: string;
  content: string;
  score: number;
}

/** The messages of a conversation, in `position` order; a turn's two messages commit together. */
export const messages = pgTable(
  'messages',
  {
    id: text('id').primaryKey(),
    conversationId: text('conversation_id')
      .notNull()
      .references(() => conversations.id, { onDelete: 'cascade' }),
    position: integer('position').notNull(),
    role: text('role').$type<MessageRole>().notNull(),
    content: text('content').notNull(),
    /** The sources the model was given (assistant messages of chatbots with retrieval). */
    sources: jsonb('sources').$type<StoredSource[]>(),
    /** A configured fallback response, sent because the model provider failed. */
    fallback: boolean('fallback').notNull().default(false),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [uniqueIndex('messages_conversation_position_idx').on(t.conversationId, t.position)],
);

export type MessageRow = typeof messages.$inferSelect;
