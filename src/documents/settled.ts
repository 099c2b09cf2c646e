import type { Database, Subscription } from '../db/client.ts';

/** The channel migration 0009's trigger announces settled and deleted documents on. */
export const DOCUMENTS_CHANNEL = 'ragport_documents';

/**
 * Long-polls for documents to settle (`?wait=true`). One LISTEN per process, whatever the number
 * of waiters: a waiter re-reads its document only when the database announces a change to it, or
 * when announcements may have been missed (the server connection dropped or has just come up).
 * The announcement comes from a trigger, so every writer — this process, another instance, a
 * separate worker — is heard, on PGlite and on the server alike.
 */
export function createSettledWaiters(database: Database) {
  const waiters = new Map<string, Set<() => void>>();
  let subscription: Promise<Subscription> | undefined;
  /** Set by `release`: waits end after one read. */
  let released = false;

  const wake = (id: string) => {
    for (const w of waiters.get(id) ?? []) w();
  };
  const wakeAll = () => {
    for (const set of waiters.values()) for (const w of set) w();
  };

  return {
    /**
     * Resolves true as soon as `settled()` holds, false when `timeoutMs` passes or `signal` aborts
     * first. `settled` reads the document; it runs once at the start and after each announcement.
     */
    async until(id: string, timeoutMs: number, signal: AbortSignal, settled: () => Promise<boolean>): Promise<boolean> {
      subscription ??= database.listen(DOCUMENTS_CHANNEL, wake, wakeAll);
      await subscription;
      let pending = false;
      let notify = () => {
        pending = true;
      };
      const waiter = () => notify();
      const set = waiters.get(id) ?? new Set();
      waiters.set(id, set);
      set.add(waiter);
      const deadline = Date.now() + timeoutMs;
      try {
        for (;;) {
          // Registered before the read: a change committed after it is always heard.
          pending = false;
          if (await settled()) return true;
          if (released) return false;
          if (pending) continue;
          const woken = await new Promise<boolean>((resolve) => {
            const remaining = deadline - Date.now();
            if (remaining <= 0 || signal.aborted) return resolve(false);
            const done = (value: boolean) => {
              clearTimeout(timer);
              signal.removeEventListener('abort', onAbort);
              notify = () => {
                pending = true;
              };
              resolve(value);
            };
            const onAbort = () => done(false);
            const timer = setTimeout(() => done(false), remaining);
            signal.addEventListener('abort', onAbort, { once: true });
            notify = () => done(true);
          });
          if (!woken) return false;
        }
      } finally {
        set.delete(waiter);
        if (set.size === 0 && waiters.get(id) === set) waiters.delete(id);
      }
    },

    /**
     * Ends every wait, now and from now on, with the document as it is (the route answers 202 with
     * it): the server is shutting down, its worker has stopped, and nothing would settle the
     * document before the deadline, which a waiting client would otherwise hold the shutdown for.
     */
    release(): void {
      released = true;
      wakeAll();
    },

    /** Waiters now, for tests and metrics. */
    count: () => [...waiters.values()].reduce((n, s) => n + s.size, 0),

    async close(): Promise<void> {
      const current = subscription;
      subscription = undefined;
      wakeAll();
      if (current) await (await current).close();
    },
  };
}

export type SettledWaiters = ReturnType<typeof createSettledWaiters>;
