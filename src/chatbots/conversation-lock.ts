import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { randomBase62 } from '../db/ids.ts';
import { AppError, notFound } from '../errors.ts';
import type { ConversationsRepository } from './conversations.repository.ts';

export interface LockSettings {
  /** How long a lease lasts without renewal: a crashed holder blocks its conversation this long at most. */
  leaseMs: number;
  /** How long a message waits for the turn before it is refused with 409. */
  waitMs: number;
  minPollMs: number;
  maxPollMs: number;
}

export const defaultLockSettings: LockSettings = { leaseMs: 30_000, waitMs: 120_000, minPollMs: 20, maxPollMs: 250 };

export interface HeldLock {
  token: string;
  /** Stops renewing the lease (saving the turn releases it). */
  stopRenewing(): void;
  /** Gives the lease back without saving anything. */
  release(): Promise<void>;
}

/**
 * One turn at a time per conversation, across every instance sharing the database: a lease on the
 * conversation row, taken with one conditional UPDATE, renewed while the model works, released by
 * the transaction that saves the turn. No database connection or transaction is held meanwhile.
 */
export function createConversationLocks(deps: {
  repo: ConversationsRepository;
  logger: Logger;
  settings?: Partial<LockSettings>;
}) {
  const { repo, logger } = deps;
  const settings = { ...defaultLockSettings, ...deps.settings };

  return {
    async acquire(conversationId: string, signal?: AbortSignal): Promise<HeldLock> {
      const token = randomBase62(24);
      const deadline = Date.now() + settings.waitMs;
      let delay = settings.minPollMs;
      while (!(await repo.tryLock(conversationId, token, settings.leaseMs))) {
        // Deleted meanwhile (with its chatbot, or on its own): no turn will ever free it.
        if ((await repo.find(conversationId)) === undefined) throw notFound('Conversation not found');
        if (Date.now() >= deadline) {
          throw new AppError({
            code: 'conflict',
            message: 'The conversation is busy with another message; send this one again later',
          });
        }
        try {
          await sleep(delay, undefined, signal ? { signal } : {});
        } catch {
          throw new AppError({ code: 'conflict', message: 'Request aborted while waiting for the conversation' });
        }
        delay = Math.min(delay * 2, settings.maxPollMs);
      }
      const renew = () => {
        repo.renewLock(conversationId, token, settings.leaseMs).then(
          (held) => {
            if (!held) logger.warn({ conversation_id: conversationId }, 'conversation lease lost while answering');
          },
          (error: unknown) =>
            logger.warn({ err: error, conversation_id: conversationId }, 'conversation lease renewal failed'),
        );
      };
      const timer = setInterval(renew, Math.max(1, Math.floor(settings.leaseMs / 3)));
      timer.unref();
      return {
        token,
        stopRenewing: () => clearInterval(timer),
        release: async () => {
          clearInterval(timer);
          await repo.unlock(conversationId, token);
        },
      };
    },
  };
}

export type ConversationLocks = ReturnType<typeof createConversationLocks>;
