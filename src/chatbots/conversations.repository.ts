import { and, asc, count, desc, eq, isNull, lt, or, sql } from '../db/orm.ts';
import { queryRows, type Db } from '../db/client.ts';
import { conversations, type ConversationRow } from '../db/schema/conversations.ts';
import { messages, type MessageRow, type StoredSource } from '../db/schema/messages.ts';

export interface TurnMessage {
  id: string;
  content: string;
  createdAt: Date;
}

export interface Turn {
  conversation: { id: string; chatbotId: string; keyId: string; title: string };
  /** The lease held on an existing conversation; null for a conversation this turn creates. */
  lockToken: string | null;
  user: TurnMessage;
  assistant: TurnMessage & { sources: StoredSource[] | null; fallback: boolean };
}

const lease = (leaseMs: number) => sql`now() + ${leaseMs}::int * interval '1 millisecond'`;

export function createConversationsRepository(db: Db) {
  return {
    /** The collection (by name) of each of these documents that still exists in a live collection. */
    async collectionsOfDocuments(documentIds: readonly string[]): Promise<Map<string, string>> {
      if (documentIds.length === 0) return new Map();
      const rows = await queryRows<{ id: string; name: string }>(
        db,
        sql`select d.id, c.name from documents d join collections c on c.id = d.collection_id
            where d.id = any(${sql.param([...documentIds])}::text[]) and c.deleted_at is null`,
      );
      return new Map(rows.map((r) => [r.id, r.name]));
    },

    async find(id: string): Promise<ConversationRow | undefined> {
      const [row] = await db.select().from(conversations).where(eq(conversations.id, id)).limit(1);
      return row;
    },

    /** A chatbot's conversations, the most recently active first. */
    async list(chatbotId: string, page: number, pageSize: number) {
      const rows = await db
        .select()
        .from(conversations)
        .where(eq(conversations.chatbotId, chatbotId))
        .orderBy(desc(conversations.updatedAt), desc(conversations.id))
        .limit(pageSize)
        .offset((page - 1) * pageSize);
      const [total] = await db.select({ n: count() }).from(conversations).where(eq(conversations.chatbotId, chatbotId));
      return { rows, total: total?.n ?? 0 };
    },

    async messages(conversationId: string): Promise<MessageRow[]> {
      return db
        .select()
        .from(messages)
        .where(eq(messages.conversationId, conversationId))
        .orderBy(asc(messages.position));
    },

    /** The last `limit` messages, oldest first. */
    async recentMessages(conversationId: string, limit: number): Promise<MessageRow[]> {
      if (limit <= 0) return [];
      const rows = await db
        .select()
        .from(messages)
        .where(eq(messages.conversationId, conversationId))
        .orderBy(desc(messages.position))
        .limit(limit);
      return rows.reverse();
    },

    /** Takes the conversation's lease if nobody holds it (or the holder's lease ran out). */
    async tryLock(id: string, token: string, leaseMs: number): Promise<boolean> {
      const taken = await db
        .update(conversations)
        .set({ lockToken: token, lockedUntil: lease(leaseMs) })
        .where(
          and(eq(conversations.id, id), or(isNull(conversations.lockToken), lt(conversations.lockedUntil, sql`now()`))),
        )
        .returning({ id: conversations.id });
      return taken.length > 0;
    },

    async renewLock(id: string, token: string, leaseMs: number): Promise<boolean> {
      const renewed = await db
        .update(conversations)
        .set({ lockedUntil: lease(leaseMs) })
        .where(and(eq(conversations.id, id), eq(conversations.lockToken, token)))
        .returning({ id: conversations.id });
      return renewed.length > 0;
    },

    async unlock(id: string, token: string): Promise<void> {
      await db
        .update(conversations)
        .set({ lockToken: null, lockedUntil: null })
        .where(and(eq(conversations.id, id), eq(conversations.lockToken, token)));
    },

    /**
     * The user message and the reply, in one transaction: a new conversation is created with
     * them; an existing one gets them after its last message, and its lease is released. Returns
     * undefined when the lease was lost meanwhile (nothing is written then).
     */
    async saveTurn(turn: Turn): Promise<ConversationRow | undefined> {
      return db.transaction(async (tx) => {
        const { conversation, user, assistant } = turn;
        let row: ConversationRow | undefined;
        if (turn.lockToken === null) {
          [row] = await tx
            .insert(conversations)
            .values({ ...conversation, messageCount: 2, createdAt: user.createdAt, updatedAt: assistant.createdAt })
            .returning();
        } else {
          [row] = await tx
            .update(conversations)
            .set({
              messageCount: sql`${conversations.messageCount} + 2`,
              updatedAt: assistant.createdAt,
              lockToken: null,
              lockedUntil: null,
            })
            .where(and(eq(conversations.id, conversation.id), eq(conversations.lockToken, turn.lockToken)))
            .returning();
        }
        if (row === undefined) return undefined;
        const position = row.messageCount - 2;
        await tx.insert(messages).values([
          {
            id: user.id,
            conversationId: row.id,
            position,
            role: 'user',
            content: user.content,
            createdAt: user.createdAt,
          },
          {
            id: assistant.id,
            conversationId: row.id,
            position: position + 1,
            role: 'assistant',
            content: assistant.content,
            sources: assistant.sources,
            fallback: assistant.fallback,
            createdAt: assistant.createdAt,
          },
        ]);
        return row;
      });
    },
  };
}

export type ConversationsRepository = ReturnType<typeof createConversationsRepository>;
