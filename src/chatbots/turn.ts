import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { Logger } from 'pino';
import type { ChatbotRow } from '../db/schema/chatbots.ts';
import type { Caller } from '../gateway/gateway.service.ts';
import { counterFor, textOf } from '../gateway/tokens.ts';
import { notFound } from '../errors.ts';
import type { Principal } from '../keys/principal.ts';
import type { RetrievalService } from '../retrieval/retrieval.service.ts';
import { checkTokenQuota, type TokenQuota } from '../usage/quota.ts';
import type { ChatbotsRepository } from './chatbots.repository.ts';
import type { Source } from './chatbots.schemas.ts';
import { providerFailed } from './fallback.ts';
import {
  buildPrompt,
  retrievalQuery,
  systemPromptOf,
  textOfMessage,
  withinMemory,
  type HistoryItem,
  type Prompt,
  type PromptSource,
} from './prompt.ts';

export interface TurnDeps {
  retrieval: Pick<RetrievalService, 'search'>;
  /** Tokens each key used this month: a key over its quota is refused before retrieval works for it. */
  quota: Pick<TokenQuota, 'tokensThisMonth'>;
  repo: Pick<ChatbotsRepository, 'takeFallbackTurn'>;
  /** The context window of a model (or alias), in tokens. */
  contextWindow: (model: string) => number;
  logger: Logger;
}

/** One exchange with a chatbot, whichever endpoint it came through. */
export interface Turn {
  history: HistoryItem[];
  message: ChatCompletionMessageParam;
  /** The user turn before this one, for follow-up questions. */
  previousUserText: string | undefined;
  /** Room kept for the reply. */
  maxTokens: number;
}

const EXCERPT_CHARS = 500;

/**
 * The start of a text, cut at a word boundary when there is one near the limit, never inside a
 * surrogate pair: half an emoji made the stored sources invalid jsonb (a 500 after the model had
 * answered) and the excerpt invalid Unicode for strict JSON parsers.
 */
export function excerpt(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const space = text.lastIndexOf(' ', limit);
  let end = space > limit * 0.8 ? space : limit;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${text.slice(0, end).trimEnd()}…`;
}

/** A source as the API returns it: an excerpt of the chunk the model got. */
export const toSource = (s: PromptSource): Source => ({
  title: s.title,
  content: excerpt(s.content, EXCERPT_CHARS),
  score: s.score,
  document_id: s.document_id,
});

export const callerOf = (principal: Principal): Caller => ({
  keyId: principal.keyId,
  tokensPerMonth: principal.quota.tokensPerMonth,
});

/** What both external endpoints do around the model call: retrieval, the prompt, fallbacks. */
export function createTurns({ retrieval, quota, repo, contextWindow, logger }: TurnDeps) {
  return {
    /** Retrieval for the turn, then the prompt within the model's window. */
    async prepare(principal: Principal, bot: ChatbotRow, turn: Turn, signal?: AbortSignal): Promise<Prompt> {
      // The gateway checks again before the model call; this one spares the search (its query
      // embedding, its rerank call) for a key that will be refused anyway.
      await checkTokenQuota(quota, principal.keyId, principal.quota.tokensPerMonth);
      let sources: PromptSource[] | undefined;
      if (bot.useRag) {
        if (bot.ragCollection === null) throw notFound('Collection not found');
        const hits = await retrieval.search(
          principal,
          {
            query: retrievalQuery(textOfMessage(turn.message), turn.previousUserText),
            collection: bot.ragCollection,
            topK: bot.ragTopK,
            threshold: bot.ragSimilarityThreshold,
            mode: 'hybrid',
            rerank: bot.ragRerank ?? undefined,
          },
          signal,
        );
        sources = hits.map((h) => ({
          document_id: h.document_id,
          title: h.metadata.title,
          content: h.content,
          // Sources keep their documented score, the cosine similarity their threshold applies to.
          score: h.scores.dense,
        }));
      }
      const window = contextWindow(bot.model);
      const history = withinMemory(turn.history, bot.memoryLength);
      // The messages may be long (a pasted document, a run of 200,000 characters without a
      // space): counted first with pauses for other requests; the rest is short.
      const counter = await counterFor([
        ...history.map((h) => textOf(h.message.content)),
        textOf(turn.message.content),
      ]);
      const prompt = buildPrompt(
        {
          systemPrompt: systemPromptOf(bot),
          sources,
          history,
          message: turn.message,
          budget: window - turn.maxTokens,
        },
        counter,
      );
      if (sources !== undefined && sources.length > 0 && prompt.droppedSources === sources.length) {
        // The model is told no sources are available: worth saying why, once per turn.
        logger.warn(
          {
            chatbot_id: bot.id,
            model: bot.model,
            window,
            max_tokens: turn.maxTokens,
            dropped_sources: prompt.droppedSources,
          },
          'chatbot sources left out: none fits the context window less max_tokens (set the model in context_windows of RAGPORT_CONFIG, or lower max_tokens)',
        );
      } else if (prompt.droppedMessages > 0 || prompt.droppedSources > 0) {
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
    },

    /** The next fallback response (rotating, on every instance), or the failure itself when none applies. */
    async fallbackFor(bot: ChatbotRow, error: unknown, signal?: AbortSignal): Promise<string> {
      if (!providerFailed(error) || signal?.aborted === true || bot.fallbackResponses.length === 0) throw error;
      const turn = await repo.takeFallbackTurn(bot.id);
      logger.warn(
        { chatbot_id: bot.id, code: error.code, cause: error.message, err: error.cause },
        'model provider failed; answered with a fallback response',
      );
      return bot.fallbackResponses[turn % bot.fallbackResponses.length] as string;
    },
  };
}

export type Turns = ReturnType<typeof createTurns>;
