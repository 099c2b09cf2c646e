import type { Logger } from 'pino';
import { isForeignKeyViolation } from '../db/errors.ts';
import { newId } from '../db/ids.ts';
import type { GatewayService } from '../gateway/gateway.service.ts';
import { AppError, notFound } from '../errors.ts';
import type { Principal } from '../keys/principal.ts';
import type { ChatBody, ChatResponse } from './chatbots.schemas.ts';
import type { ChatbotsService } from './chatbots.service.ts';
import type { ConversationLocks, HeldLock } from './conversation-lock.ts';
import type { ConversationsRepository } from './conversations.repository.ts';
import type { Sampling } from './sampling.ts';
import { callerOf, excerpt, toSource, type Turns } from './turn.ts';
import type { Clock } from '../clock.ts';

export interface ChatServiceDeps {
  chatbots: Pick<ChatbotsService, 'requireChatbot'>;
  conversations: ConversationsRepository;
  locks: ConversationLocks;
  turns: Turns;
  gateway: Pick<GatewayService, 'complete'>;
  sampling: Sampling;
  logger: Logger;
  clock: Clock;
}

const TITLE_CHARS = 100;

/**
 * POST /chatbot/external/{id}/chat: one message in, the reply out, the history kept in the
 * database. A turn holds its conversation's lease from reading the history until the user message
 * and the reply are saved together, so concurrent messages to one conversation never interleave;
 * a failed model call saves nothing.
 */
export function createChatService({
  chatbots,
  conversations,
  locks,
  turns,
  gateway,
  sampling,
  logger,
  clock,
}: ChatServiceDeps) {
  return {
    async chat(principal: Principal, chatbotId: string, body: ChatBody, signal?: AbortSignal): Promise<ChatResponse> {
      // The message's place among those to its conversation is taken as it arrives, before the
      // round trips below, which on a pool may finish out of order.
      const place = body.conversation_id == null ? undefined : locks.enqueue(body.conversation_id);
      let bot;
      let existing;
      try {
        bot = await chatbots.requireChatbot(principal, chatbotId);
        if (body.conversation_id != null) {
          existing = await conversations.find(body.conversation_id);
          if (existing?.chatbotId !== bot.id) throw notFound('Conversation not found');
        }
      } catch (error) {
        place?.cancel();
        throw error;
      }
      let lock: HeldLock | undefined = place === undefined ? undefined : await place.acquire(signal);
      // The message's time is when its turn begins, after the turns it waited for, so the stored
      // times follow the stored order.
      const receivedAt = new Date(clock());
      try {
        // A message that waited for the conversation is answered with the chatbot as it is now
        // (a PUT while it waited applies to it), or not at all if the chatbot is gone.
        if (lock !== undefined) bot = await chatbots.requireChatbot(principal, chatbotId);
        // Turns are stored in pairs, so the last user message is among the last two.
        const stored =
          existing === undefined ? [] : await conversations.recentMessages(existing.id, Math.max(bot.memoryLength, 2));
        const history = bot.memoryLength === 0 ? [] : stored.slice(-bot.memoryLength);
        const prompt = await turns.prepare(
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
          const { completion } = await sampling.send(
            {
              model: bot.model,
              messages: prompt.messages,
              temperature: bot.temperature,
              maxTokens: bot.maxTokens,
              callerTemperature: false,
            },
            (params) => gateway.complete(params, { signal, caller: callerOf(principal) }),
          );
          response = completion.choices[0]?.message?.content ?? '';
        } catch (error) {
          response = await turns.fallbackFor(bot, error, signal);
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
          // Deleted while the model answered (the chatbot with its conversations, or the conversation).
          await chatbots.requireChatbot(principal, chatbotId);
          if (existing !== undefined && (await conversations.find(existing.id)) === undefined) {
            throw notFound('Conversation not found');
          }
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
