import type { CollectionsService } from '../collections/collections.service.ts';
import { newId } from '../db/ids.ts';
import type { ChatbotRow } from '../db/schema/chatbots.ts';
import type { ConversationRow } from '../db/schema/conversations.ts';
import type { MessageRow, StoredSource } from '../db/schema/messages.ts';
import { AppError, notFound } from '../errors.ts';
import { rerankModelNotFound } from '../gateway/rerank.ts';
import { canUseCollection, coversCollections, hasScope, type Principal } from '../keys/principal.ts';
import type { ChatbotPatch, ChatbotsRepository, OwnedChatbotRow } from './chatbots.repository.ts';
import type { ChatbotRecord, ConversationDetail, CreateChatbotBody, UpdateChatbotBody } from './chatbots.schemas.ts';
import type { ConversationsRepository } from './conversations.repository.ts';
import { systemPromptOf } from './prompt.ts';

export interface ChatbotsServiceDeps {
  repo: ChatbotsRepository;
  conversations: ConversationsRepository;
  collections: Pick<CollectionsService, 'requireAccessible'>;
  /** Whether the gateway serves this chat model (or alias). */
  modelExists: (model: string) => Promise<boolean>;
  /** Whether a provider serves this rerank model (or alias); absent: not checked. */
  rerankModelExists?: (model: string) => Promise<boolean>;
}

const NOT_FOUND = 'Chatbot not found';
const CONVERSATION_NOT_FOUND = 'Conversation not found';

export function toChatbotRecord(row: ChatbotRow): ChatbotRecord {
  return {
    id: row.id,
    name: row.name,
    chatbot_type: row.chatbotType,
    model: row.model,
    system_prompt: systemPromptOf(row),
    use_rag: row.useRag,
    rag_collection: row.ragCollection,
    rag_top_k: row.ragTopK,
    rag_similarity_threshold: row.ragSimilarityThreshold,
    rag_rerank: row.ragRerank ?? null,
    memory_length: row.memoryLength,
    temperature: row.temperature,
    max_tokens: row.maxTokens,
    fallback_responses: row.fallbackResponses,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}

const toSummary = (row: ConversationRow) => ({
  id: row.id,
  chatbot_id: row.chatbotId,
  title: row.title,
  message_count: row.messageCount,
  created_at: row.createdAt.toISOString(),
  updated_at: row.updatedAt.toISOString(),
});

const toMessage = (row: MessageRow) => ({
  id: row.id,
  role: row.role,
  content: row.content,
  sources: row.sources,
  fallback: row.fallback,
  timestamp: row.createdAt.toISOString(),
});

/** The columns a request sets (an empty or blank prompt means the default of the type); others stay out. */
function columnsOf(body: UpdateChatbotBody): ChatbotPatch {
  const prompt = body.system_prompt;
  const columns: ChatbotPatch = {
    name: body.name,
    chatbotType: body.chatbot_type,
    model: body.model,
    systemPrompt: prompt === undefined ? undefined : prompt === null || prompt.trim() === '' ? null : prompt,
    useRag: body.use_rag,
    ragCollection: body.rag_collection,
    ragTopK: body.rag_top_k,
    ragSimilarityThreshold: body.rag_similarity_threshold,
    ragRerank: body.rag_rerank,
    memoryLength: body.memory_length,
    temperature: body.temperature,
    maxTokens: body.max_tokens,
    fallbackResponses: body.fallback_responses,
  };
  return Object.fromEntries(Object.entries(columns).filter(([, v]) => v !== undefined));
}

/**
 * Whether a key sees a chatbot: its own, or any for an admin key, as long as the chatbot's
 * collection is one the key may use. A restricted admin that saw others' chatbots over hidden
 * collections would learn their names, and read their conversations, whose sources quote them.
 * A chatbot over no collection it sees when its owner key is one it manages (restricted to some
 * of its collections): otherwise one tenant's admin read and changed every other tenant's
 * chatbots without retrieval, and their conversations.
 */
const visibleTo = (principal: Principal, row: OwnedChatbotRow): boolean =>
  row.ownerKeyId === principal.keyId ||
  (hasScope(principal, 'admin') &&
    (row.ragCollection === null
      ? coversCollections(principal, row.ownerCollections)
      : canUseCollection(principal, row.ragCollection)));

/**
 * What a stored conversation may show a key restricted to collections: the sources of collections
 * it may use. A chatbot's collection can change (and a key's restriction narrow) after a turn
 * quoted another collection, whose text would otherwise stay readable through the conversation.
 * A source whose document is gone (or its collection) is dropped too: where it came from is no
 * longer known.
 */
async function sourcesWithinReach<M extends { sources: StoredSource[] | null }>(
  conversations: Pick<ConversationsRepository, 'collectionsOfDocuments'>,
  principal: Principal,
  messages: M[],
): Promise<M[]> {
  if (principal.collections === null) return messages;
  const ids = new Set(messages.flatMap((m) => (m.sources ?? []).map((s) => s.document_id)));
  if (ids.size === 0) return messages;
  const collectionOf = await conversations.collectionsOfDocuments([...ids]);
  const allowed = (source: StoredSource) => {
    const name = collectionOf.get(source.document_id);
    return name !== undefined && canUseCollection(principal, name);
  };
  return messages.map((m) => (m.sources === null ? m : { ...m, sources: m.sources.filter(allowed) }));
}

/** Chatbot records, owned by the key that created them; an admin key sees and uses every one it may. */
export function createChatbotsService({
  repo,
  conversations,
  collections,
  modelExists,
  rerankModelExists,
}: ChatbotsServiceDeps) {
  /** A chatbot this key may not see is reported exactly like a missing one. */
  const requireChatbot = async (principal: Principal, id: string): Promise<ChatbotRow> => {
    const row = await repo.find(id);
    if (!row || !visibleTo(principal, row)) throw notFound(NOT_FOUND);
    return row;
  };

  /**
   * Retrieval needs a collection; a collection being set must exist and be one this key may use.
   * The contract: `use_rag: true` requires an existing, accessible `rag_collection`, else 404
   * `Collection not found`; none named is no existing one.
   */
  const checkCollection = async (
    principal: Principal,
    useRag: boolean,
    collection: string | null,
    setting: boolean,
  ) => {
    if (useRag && collection === null) throw notFound('Collection not found');
    if (setting && collection !== null) await collections.requireAccessible(principal, collection);
  };

  const checkModel = async (model: string) => {
    if (!(await modelExists(model))) {
      throw new AppError({ code: 'model_not_found', message: `The model '${model}' does not exist`, param: 'model' });
    }
  };

  /** A rerank stage names a model a provider serves: else every turn of the chatbot would be a 404. */
  const checkRerank = async (rerank: { model: string } | null | undefined) => {
    if (rerank == null || rerankModelExists === undefined || (await rerankModelExists(rerank.model))) return;
    throw rerankModelNotFound(rerank.model, 'rag_rerank.model');
  };

  return {
    requireChatbot,

    async create(principal: Principal, body: CreateChatbotBody): Promise<ChatbotRecord> {
      const ragCollection = body.rag_collection ?? null;
      await checkCollection(principal, body.use_rag, ragCollection, true);
      await checkModel(body.model);
      await checkRerank(body.rag_rerank);
      // Every column has a value: the create body's defaults fill what the request left out.
      const columns = columnsOf(body) as Required<ChatbotPatch>;
      const row = await repo.insert({
        ...columns,
        id: newId('bot'),
        ownerKeyId: principal.keyId,
        systemPrompt: columns.systemPrompt ?? null,
        ragCollection,
      });
      return toChatbotRecord(row);
    },

    async list(principal: Principal): Promise<ChatbotRecord[]> {
      const rows = await repo.list(hasScope(principal, 'admin') ? null : principal.keyId);
      return rows.filter((row) => visibleTo(principal, row)).map(toChatbotRecord);
    },

    async get(principal: Principal, id: string): Promise<ChatbotRecord> {
      return toChatbotRecord(await requireChatbot(principal, id));
    },

    async update(principal: Principal, id: string, body: UpdateChatbotBody): Promise<ChatbotRecord> {
      const current = await requireChatbot(principal, id);
      // Turning retrieval off, or changing other fields, never needs the collection to be there.
      await checkCollection(
        principal,
        body.use_rag ?? current.useRag,
        body.rag_collection === undefined ? current.ragCollection : body.rag_collection,
        body.rag_collection !== undefined || body.use_rag === true,
      );
      if (body.model !== undefined && body.model !== current.model) await checkModel(body.model);
      if (body.rag_rerank?.model !== current.ragRerank?.model) await checkRerank(body.rag_rerank);
      const row = await repo.update(id, columnsOf(body));
      if (!row) throw notFound(NOT_FOUND);
      return toChatbotRecord(row);
    },

    async delete(principal: Principal, id: string): Promise<void> {
      await requireChatbot(principal, id);
      if (!(await repo.delete(id))) throw notFound(NOT_FOUND);
    },

    async listConversations(principal: Principal, chatbotId: string, page: number, pageSize: number) {
      const bot = await requireChatbot(principal, chatbotId);
      const { rows, total } = await conversations.list(bot.id, page, pageSize);
      return { conversations: rows.map(toSummary), page, page_size: pageSize, total };
    },

    /** A conversation of a chatbot the key may not use is reported exactly like a missing one. */
    async getConversation(principal: Principal, id: string): Promise<ConversationDetail> {
      const row = await conversations.find(id);
      if (!row) throw notFound(CONVERSATION_NOT_FOUND);
      await requireChatbot(principal, row.chatbotId).catch(() => {
        throw notFound(CONVERSATION_NOT_FOUND);
      });
      const stored = (await conversations.messages(row.id)).map(toMessage);
      return { ...toSummary(row), messages: await sourcesWithinReach(conversations, principal, stored) };
    },
  };
}

export type ChatbotsService = ReturnType<typeof createChatbotsService>;
