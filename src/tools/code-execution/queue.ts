/**
 * A bounded, fair queue in front of a fixed number of slots. Each key may hold at most
 * `perKeyRunning` slots and have at most `perKeyWaiting` calls waiting; a freed slot goes to the
 * next key in round-robin order that has a call waiting and room to run, so one key flooding the
 * queue delays only itself. `acquire` answers at once with undefined when the call cannot even
 * wait (the queue, or this key's share of it, is full): the caller reports capacity exceeded.
 */
export interface SlotQueueOptions {
  slots: number;
  maxWaiting: number;
  perKeyRunning: number;
  perKeyWaiting: number;
}

interface Waiter {
  key: string;
  resolve: (slot: number) => void;
  signal: AbortSignal;
  onAbort: () => void;
}

export function createSlotQueue(options: SlotQueueOptions) {
  const free = Array.from({ length: options.slots }, (_v, i) => i);
  const running = new Map<string, number>();
  /** Waiters per key, and the keys in the order they get their next turn. */
  const waiting = new Map<string, Waiter[]>();
  const turns: string[] = [];
  let waitingCount = 0;

  const runningOf = (key: string) => running.get(key) ?? 0;
  const take = (key: string, slot: number) => {
    running.set(key, runningOf(key) + 1);
    return slot;
  };

  /** Hands free slots to waiting keys in turn. */
  const dispatch = () => {
    while (free.length > 0) {
      const at = turns.findIndex((key) => runningOf(key) < options.perKeyRunning);
      if (at < 0) return;
      const key = turns[at] as string;
      const queue = waiting.get(key) as Waiter[];
      const next = queue.shift() as Waiter;
      waitingCount -= 1;
      turns.splice(at, 1);
      if (queue.length > 0) turns.push(key);
      else waiting.delete(key);
      next.signal.removeEventListener('abort', next.onAbort);
      next.resolve(take(key, free.shift() as number));
    }
  };

  return {
    /** Resolves with a slot to pass to `release`; rejects if `signal` aborts while waiting. */
    acquire(key: string, signal: AbortSignal): Promise<number> | undefined {
      if (runningOf(key) < options.perKeyRunning && !waiting.has(key)) {
        const slot = free.shift();
        if (slot !== undefined) return Promise.resolve(take(key, slot));
      }
      const queue = waiting.get(key) ?? [];
      if (waitingCount >= options.maxWaiting || queue.length >= options.perKeyWaiting) return undefined;
      return new Promise<number>((resolve, reject) => {
        const entry: Waiter = {
          key,
          resolve,
          signal,
          onAbort: () => {
            const list = waiting.get(key);
            const index = list?.indexOf(entry) ?? -1;
            if (list && index >= 0) {
              list.splice(index, 1);
              waitingCount -= 1;
              if (list.length === 0) {
                waiting.delete(key);
                turns.splice(turns.indexOf(key), 1);
              }
            }
            reject(signal.reason as Error);
          },
        };
        signal.addEventListener('abort', entry.onAbort, { once: true });
        if (!waiting.has(key)) {
          waiting.set(key, queue);
          turns.push(key);
        }
        queue.push(entry);
        waitingCount += 1;
      });
    },
    release(key: string, slot: number): void {
      const n = runningOf(key) - 1;
      if (n > 0) running.set(key, n);
      else running.delete(key);
      free.push(slot);
      dispatch();
    },
    stats: () => ({ free: free.length, waiting: waitingCount, keys: running.size }),
  };
}

export type SlotQueue = ReturnType<typeof createSlotQueue>;
