import { index, integer, pgTable, text, timestamp } from '../orm.ts';
import { createdAt, updatedAt } from '../columns.ts';
import { chatbots } from './chatbots.ts';

/**
 * One session of the custom chat API. A turn in progress holds the row's lease (`lock_token`
 * until `locked_until`, renewed while the model works), so turns of one conversation run one at
 * a time on every instance sharing the database.
 */
export const conversations = pgTable(
  'conversations',
  {
    id: text('id').primaryKey(),
    chatbotId: text('chatbot_id')
      .notNull()
      .references(() => chatbots.id, { onDelete: 'cascade' }),
    /** The key that started it. */
    keyId: text('key_id').notNull(),
    /** The start of its first message, for listings. */
    title: text('title').notNull(),
    /** Messages stored so far; the next message's position. */
    messageCount: integer('message_count').notNull().default(0),
    lockToken: text('lock_token'),
    lockedUntil: timestamp('locked_until', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index('conversations_chatbot_updated_idx').on(t.chatbotId, t.updatedAt)],
);

export type ConversationRow = typeof conversations.$inferSelect;
