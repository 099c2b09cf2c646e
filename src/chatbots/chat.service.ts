import type {
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { Logger } from 'pino';
import { isForeignKeyViolation } from '../db/errors.ts';
import { newId } from '../db/ids.ts';
import type { ChatbotRow } from '../db/schema/chatbots.ts';
import type { Caller, ChatStream, GatewayService } from '../gateway/gateway.service.ts';
import { tokenCounter } from '../gateway/tokens.ts';
import { AppError, invalid, notFound } from '../http/errors.ts';
import type { Principal } from '../keys/principal.ts';
import type { RetrievalService } from '../retrieval/retrieval.service.ts';
import type { ChatbotsRepository } from './chatbots.repository.ts';
import type { ChatBody, ChatbotCompletionRequest, ChatResponse, Source } from './chatbots.schemas.ts';
import type { ChatbotsService } from './chatbots.service.ts';
import type { ConversationLocks, HeldLock } from './conversation-lock.ts';
import type { ConversationsRepository } from './conversations.repository.ts';
import { fallbackCompletion, fallbackStream, providerFailed, withSources } from './fallback.ts';
import {
  buildPrompt,
  retrievalQuery,
  systemPromptOf,
  textOfMessage,
  withinMemory,
  type HistoryItem,
  type PromptSource,
} from './prompt.ts';

export interface ChatServiceDeps {
  chatbots: Pick<ChatbotsService, 'requireChatbot' | 'requireConversation'>;
  repo: Pick<ChatbotsRepository, 'takeFallbackTurn'>;
  conversations: ConversationsRepository;
  locks: ConversationLocks;
  retrieval: Pick<RetrievalService, 'search'>;
  gateway: Pick<GatewayService, 'complete' | 'stream'>;
  /** The context window of a model (or alias), in tokens. */
  contextWindow: (model: string) => number;
  logger: Logger;
  clock: () => number;
}

/** What the completions endpoint sends: a JSON body, or a stream to frame as SSE. */
export type CompletionOutcome =
  { kind: 'json'; body: string } | { kind: 'stream'; stream: ChatStream; includeUsage: boolean };

const EXCERPT_CHARS = 500;
const TITLE_CHARS = 100;

/** The start of a text, cut at a word boundary when there is one near the limit. */
function excerpt(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const space = text.lastIndexOf(' ', limit);
  return `${text.slice(0, space > limit * 0.8 ? space : limit).trimEnd()}…`;
}

const toSource = (s: PromptSource): Source => ({
  title: s.title,
  content: excerpt(s.content, EXCERPT_CHARS),
  score: s.score,
  document_id: s.document_id,
});

interface Turn {
  history: HistoryItem[];
  message: ChatCompletionMessageParam;
  /** The user turn before this one, for follow-up questions. */
  previousUserText: string | undefined;
  maxTokens: number;
}

/** The two external endpoints: retrieval, the prompt within the model's window, the call, fallbacks. */
export function createChatService(deps: ChatServiceDeps) {
  const { chatbots, conversations, locks, retrieval, gateway, logger, clock } = deps;

  /** Retrieval for the turn, then the prompt: system prompt and context, history, the new message. */
  const prepare = async (principal: Principal, bot: ChatbotRow, turn: Turn, signal: AbortSignal | undefined) => {
    let sources: PromptSource[] | undefined;
    if (bot.useRag) {
      if (bot.ragCollection === null) throw notFound('Collection not found');
      const query = retrievalQuery(textOfMessage(turn.message), turn.previousUserText);
      const hits = await retrieval.search(
        principal,
        {
          query,
          collection: bot.ragCollection,
          topK: bot.ragTopK,
          threshold: bot.ragSimilarityThreshold,
          mode: 'hybrid',
        },
        signal,
      );
      sources = hits.map((h) => ({
        document_id: h.document_id,
        title: h.metadata.title,
        content: h.content,
        score: h.score,
      }));
    }
    const window = deps.contextWindow(bot.model);
    const prompt = buildPrompt(
      {
        systemPrompt: systemPromptOf(bot),
        sources,
        history: withinMemory(turn.history, bot.memoryLength),
        message: turn.message,
        budget: window - turn.maxTokens,
      },
      await tokenCounter(),
    );
    if (prompt.droppedMessages > 0 || prompt.droppedSources > 0) {
      logger.debug(
        {
          chatbot_id: bot.id,
          window,
          dropped_messages: prompt.droppedMessages,
          dropped_sources: prompt.droppedSources,
        },
        'chatbot prompt trimmed to the context window',
      );
    }
    return prompt;
  };

  /** The next fallback response, or the failure itself when there is none to give. */
  const fallbackFor = async (bot: ChatbotRow, error: unknown, signal: AbortSignal | undefined): Promise<string> => {
    if (!providerFailed(error) || signal?.aborted === true || bot.fallbackResponses.length === 0) throw error;
    const turn = await deps.repo.takeFallbackTurn(bot.id);
    logger.warn(
      { chatbot_id: bot.id, code: error.code, cause: error.message, err: error.cause },
      'model provider failed; answered with a fallback response',
    );
    return bot.fallbackResponses[turn % bot.fallbackResponses.length] as string;
  };

  const callerOf = (principal: Principal): Caller => ({
    keyId: principal.keyId,
    tokensPerMonth: principal.quota.tokensPerMonth,
  });

  return {
    /** POST /chatbot/external/{id}/chat/completions: the caller's messages as history, OpenAI format. */
    async completions(
      principal: Principal,
      chatbotId: string,
      body: ChatbotCompletionRequest,
      signal?: AbortSignal,
    ): Promise<CompletionOutcome> {
      const bot = await chatbots.requireChatbot(principal, chatbotId);
      const messages = body.messages as ChatCompletionMessageParam[];
      const message = messages.at(-1) as ChatCompletionMessageParam;
      if (message.role !== 'user') throw invalid('messages: the last message must be from the user', 'messages');
      const earlier = messages.slice(0, -1);
      const previousUser = earlier.findLast((m) => m.role === 'user');
      const maxTokens = body.max_tokens ?? body.max_completion_tokens ?? bot.maxTokens;
      const prompt = await prepare(
        principal,
        bot,
        {
          // The caller's own instructions stay; the rest is history, bounded by memory_length.
          history: earlier.map((m) => ({ message: m, pinned: m.role === 'system' || m.role === 'developer' })),
          message,
          previousUserText: previousUser === undefined ? undefined : textOfMessage(previousUser),
          maxTokens,
        },
        signal,
      );
      const params: ChatCompletionCreateParamsNonStreaming = {
        model: bot.model,
        messages: prompt.messages,
        temperature: body.temperature ?? bot.temperature,
        max_tokens: maxTokens,
      };
      const sources = prompt.sources?.map(toSource);
      const options = { signal, caller: callerOf(principal) };

      if (body.stream === true) {
        let stream: ChatStream;
        try {
          stream = await gateway.stream({ ...params, stream: true }, options);
        } catch (error) {
          stream = fallbackStream(bot.model, await fallbackFor(bot, error, signal));
        }
        return {
          kind: 'stream',
          stream: withSources(stream, sources),
          includeUsage: body.stream_options?.include_usage === true,
        };
      }
      let completion: object;
      try {
        completion = (await gateway.complete(params, options)).completion;
      } catch (error) {
        completion = fallbackCompletion(bot.model, await fallbackFor(bot, error, signal));
      }
      return { kind: 'json', body: JSON.stringify(sources === undefined ? completion : { ...completion, sources }) };
    },

    /**
     * POST /chatbot/external/{id}/chat: history from the stored conversation. The turn holds the
     * conversation's lease from reading the history until the user message and the reply are
     * saved together, so concurrent messages to one conversation never interleave.
     */
    async chat(principal: Principal, chatbotId: string, body: ChatBody, signal?: AbortSignal): Promise<ChatResponse> {
      const bot = await chatbots.requireChatbot(principal, chatbotId);
      const receivedAt = new Date(clock());
      const existing =
        body.conversation_id == null
          ? undefined
          : await chatbots.requireConversation(principal, body.conversation_id, bot.id);
      let lock: HeldLock | undefined = existing === undefined ? undefined : await locks.acquire(existing.id, signal);
      try {
        // Turns are stored in pairs, so the last user message is among the last two.
        const stored =
          existing === undefined ? [] : await conversations.recentMessages(existing.id, Math.max(bot.memoryLength, 2));
        const history = bot.memoryLength === 0 ? [] : stored.slice(-bot.memoryLength);
        const prompt = await prepare(
          principal,
          bot,
          {
            history: history.map((m) => ({ message: { role: m.role, content: m.content }, pinned: false })),
            message: { role: 'user', content: body.message },
            previousUserText: stored.findLast((m) => m.role === 'user')?.content,
            maxTokens: bot.maxTokens,
          },
          signal,
        );
        let response: string;
        let fallback = false;
        try {
          const { completion } = await gateway.complete(
            { model: bot.model, messages: prompt.messages, temperature: bot.temperature, max_tokens: bot.maxTokens },
            { signal, caller: callerOf(principal) },
          );
          response = completion.choices[0]?.message?.content ?? '';
        } catch (error) {
          response = await fallbackFor(bot, error, signal);
          fallback = true;
        }

        const sources = prompt.sources?.map(toSource);
        const answeredAt = new Date(clock());
        lock?.stopRenewing();
        let saved;
        try {
          saved = await conversations.saveTurn({
            conversation: {
              id: existing?.id ?? newId('conv'),
              chatbotId: bot.id,
              keyId: principal.keyId,
              title: excerpt(body.message.replace(/\s+/g, ' '), TITLE_CHARS),
            },
            lockToken: lock?.token ?? null,
            user: { id: newId('msg'), content: body.message, createdAt: receivedAt },
            assistant: {
              id: newId('msg'),
              content: response,
              sources: sources ?? null,
              fallback,
              createdAt: answeredAt,
            },
          });
        } catch (error) {
          // The chatbot was deleted while the model answered.
          if (isForeignKeyViolation(error)) throw notFound('Chatbot not found');
          throw error;
        }
        if (saved === undefined) {
          throw new AppError({
            code: 'conflict',
            message: 'The conversation changed while this message was answered; send it again',
          });
        }
        lock = undefined;
        return {
          conversation_id: saved.id,
          response,
          ...(sources === undefined ? {} : { sources }),
          timestamp: answeredAt.toISOString(),
          chatbot_id: bot.id,
          fallback,
        };
      } finally {
        // Without a save the lease goes back at once; should that fail, it runs out by itself.
        if (lock !== undefined) {
          await lock
            .release()
            .catch((error: unknown) => logger.warn({ err: error }, 'conversation lease release failed'));
        }
      }
    },
  };
}

export type ChatService = ReturnType<typeof createChatService>;
