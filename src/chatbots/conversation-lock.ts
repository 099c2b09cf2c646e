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

/** A message's place in its conversation's queue (see `enqueue`). */
export interface QueuedTurn {
  acquire(signal?: AbortSignal): Promise<HeldLock>;
  cancel(): void;
}

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

  /**
   * Per conversation, the turn of the last message queued in this process: each message waits for
   * the one before it to be answered (or to give up) before it polls for the lease, so messages a
   * process holds are answered in the order they arrived. Polling alone, with its backoff, let a
   * later message win over one that had waited longer (6 messages sent 100 ms apart were stored
   * as 3,1,4,2,0,5). Messages waiting on different instances are not ordered among themselves.
   */
  const queues = new Map<string, Promise<void>>();

  const busy = () =>
    new AppError({
      code: 'conflict',
      message: 'The conversation is busy with another message; send this one again later',
    });
  const aborted = () =>
    new AppError({ code: 'conflict', message: 'Request aborted while waiting for the conversation' });

  /** Waits for `turn`, at most until `deadline`; rejects on abort or timeout. */
  const waitFor = async (turn: Promise<void>, deadline: number, signal?: AbortSignal) => {
    const left = deadline - Date.now();
    if (left <= 0) throw busy();
    const timer = new AbortController();
    try {
      await Promise.race([
        turn,
        sleep(left, undefined, { signal: timer.signal }).then(() => {
          throw busy();
        }),
        ...(signal
          ? [
              new Promise<never>((_, reject) => {
                if (signal.aborted) reject(aborted());
                signal.addEventListener('abort', () => reject(aborted()), { once: true, signal: timer.signal });
              }),
            ]
          : []),
      ]);
    } finally {
      timer.abort();
    }
  };

  /**
   * Takes a message's place in its conversation's queue, synchronously: called as the request
   * arrives, before any database round trip (on a pool those finish out of order, and messages
   * 5–30 ms apart were answered out of order in 7 of 20 runs). `acquire` waits for the place's
   * turn and the lease; `cancel` gives the place up (the message was refused before waiting).
   */
  const enqueue = (conversationId: string): QueuedTurn => {
    const deadline = Date.now() + settings.waitMs;
    const before = queues.get(conversationId) ?? Promise.resolve();
    let passOn!: () => void;
    const mine = new Promise<void>((resolve) => (passOn = resolve));
    queues.set(conversationId, mine);
    void mine.then(() => {
      if (queues.get(conversationId) === mine) queues.delete(conversationId);
    });
    // This message gives up; the next one keeps its place after the one before.
    const giveUp = () => void before.then(passOn);
    return {
      cancel: giveUp,
      async acquire(signal?: AbortSignal): Promise<HeldLock> {
        try {
          await waitFor(before, deadline, signal);
          const lock = await takeLease(conversationId, deadline, signal);
          return {
            ...lock,
            stopRenewing: () => {
              lock.stopRenewing();
              // The turn is being saved: the next message may start polling.
              passOn();
            },
            release: async () => {
              try {
                await lock.release();
              } finally {
                passOn();
              }
            },
          };
        } catch (error) {
          giveUp();
          throw error;
        }
      },
    };
  };

  return {
    enqueue,
    acquire: (conversationId: string, signal?: AbortSignal): Promise<HeldLock> =>
      enqueue(conversationId).acquire(signal),
  };

  /** Polls for the conversation's lease until `deadline`; renews it every third of its length once taken. */
  async function takeLease(conversationId: string, deadline: number, signal?: AbortSignal): Promise<HeldLock> {
    const token = randomBase62(24);
    let delay = settings.minPollMs;
    while (!(await repo.tryLock(conversationId, token, settings.leaseMs))) {
      // Deleted meanwhile (with its chatbot, or on its own): no turn will ever free it.
      if ((await repo.find(conversationId)) === undefined) throw notFound('Conversation not found');
      if (Date.now() >= deadline) throw busy();
      try {
        await sleep(delay, undefined, signal ? { signal } : {});
      } catch {
        throw aborted();
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
  }
}

export type ConversationLocks = ReturnType<typeof createConversationLocks>;
