/**
 * A bounded queue in front of a fixed number of slots. `acquire` answers at once: undefined
 * when every slot is busy and the queue is full (the caller reports capacity exceeded).
 */
export function createSlotQueue(options: { slots: number; maxWaiting: number }) {
  const free = Array.from({ length: options.slots }, (_v, i) => i);
  const waiting: { resolve: (slot: number) => void; signal: AbortSignal; onAbort: () => void }[] = [];

  const release = (slot: number) => {
    const next = waiting.shift();
    if (next) {
      next.signal.removeEventListener('abort', next.onAbort);
      next.resolve(slot);
    } else free.push(slot);
  };

  return {
    /** Resolves with a slot to pass to `release`; rejects if `signal` aborts while waiting. */
    acquire(signal: AbortSignal): Promise<number> | undefined {
      const slot = free.shift();
      if (slot !== undefined) return Promise.resolve(slot);
      if (waiting.length >= options.maxWaiting) return undefined;
      return new Promise<number>((resolve, reject) => {
        const entry = {
          resolve,
          signal,
          onAbort: () => {
            waiting.splice(waiting.indexOf(entry), 1);
            reject(signal.reason as Error);
          },
        };
        signal.addEventListener('abort', entry.onAbort, { once: true });
        waiting.push(entry);
      });
    },
    release,
    stats: () => ({ free: free.length, waiting: waiting.length }),
  };
}

export type SlotQueue = ReturnType<typeof createSlotQueue>;
