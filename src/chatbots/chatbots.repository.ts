import { asc, eq, getTableColumns, sql } from '../db/orm.ts';
import type { Db } from '../db/client.ts';
import { chatbots, type ChatbotRow } from '../db/schema/chatbots.ts';
import { apiKeys } from '../db/schema/keys.ts';

/**
 * A chatbot with the collections its owner key is restricted to (null: every collection, or an
 * owner key no longer there): who else may see a chatbot over no collection depends on them.
 */
export type OwnedChatbotRow = ChatbotRow & { ownerCollections: string[] | null };

export type NewChatbot = Omit<typeof chatbots.$inferInsert, 'fallbackCursor' | 'createdAt' | 'updatedAt'>;
export type ChatbotPatch = Partial<Omit<NewChatbot, 'id' | 'ownerKeyId'>>;

export function createChatbotsRepository(db: Db) {
  const withOwner = () =>
    db
      .select({ ...getTableColumns(chatbots), ownerCollections: apiKeys.collections })
      .from(chatbots)
      .leftJoin(apiKeys, eq(apiKeys.id, chatbots.ownerKeyId));

  return {
    async insert(row: NewChatbot): Promise<ChatbotRow> {
      const [created] = await db.insert(chatbots).values(row).returning();
      if (!created) throw new Error('insert returned no row');
      return created;
    },

    async find(id: string): Promise<OwnedChatbotRow | undefined> {
      const [row] = await withOwner().where(eq(chatbots.id, id)).limit(1);
      return row;
    },

    /** Chatbots of one key, or of every key when `ownerKeyId` is null. */
    async list(ownerKeyId: string | null): Promise<OwnedChatbotRow[]> {
      return withOwner()
        .where(ownerKeyId === null ? sql`true` : eq(chatbots.ownerKeyId, ownerKeyId))
        .orderBy(asc(chatbots.createdAt), asc(chatbots.id));
    },

    async update(id: string, patch: ChatbotPatch): Promise<ChatbotRow | undefined> {
      const [row] = await db
        .update(chatbots)
        .set({ ...patch, updatedAt: sql`now()` })
        .where(eq(chatbots.id, id))
        .returning();
      return row;
    },

    /** Its conversations and their messages go by cascade, in the same statement. */
    async delete(id: string): Promise<boolean> {
      const deleted = await db.delete(chatbots).where(eq(chatbots.id, id)).returning({ id: chatbots.id });
      return deleted.length > 0;
    },

    /** How many fallbacks the chatbot handed out before this one: one counter for every instance. */
    async takeFallbackTurn(id: string): Promise<number> {
      const [row] = await db
        .update(chatbots)
        .set({ fallbackCursor: sql`${chatbots.fallbackCursor} + 1` })
        .where(eq(chatbots.id, id))
        .returning({ cursor: chatbots.fallbackCursor });
      return (row?.cursor ?? 1) - 1;
    },
  };
}

export type ChatbotsRepository = ReturnType<typeof createChatbotsRepository>;
