import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Background work (ingestion) marks what it runs here, so that the embedded database can serve
 * everything else first: PGlite has one session, and a search that arrives behind a queue of
 * ingestion statements would otherwise wait for all of them (pglite.worker.ts orders its queue).
 */
const background = new AsyncLocalStorage<true>();

/** Runs `work` with every embedded-database statement it issues queued after interactive ones. */
export const runInBackground = <T>(work: () => PromiseLike<T>): Promise<T> =>
  // Awaited inside: a lazy query (drizzle's runs when first awaited) starts in the background too.
  background.run(true, async () => await work());

/** Whether the caller is background work. */
export const inBackground = (): boolean => background.getStore() === true;

/**
 * One holder at a time, interactive waiters before background ones (each in arrival order).
 * The embedded database's thread passes every statement and transaction outside a transaction
 * through it; a holder is never preempted.
 */
export function createPriorityGate() {
  const interactive: (() => void)[] = [];
  const queued: (() => void)[] = [];
  let held = false;

  const release = () => {
    const next = interactive.shift() ?? queued.shift();
    if (next) next();
    else held = false;
  };

  return {
    /** Resolves when the caller holds the gate; it must call `release` once done. */
    acquire(backgroundWork: boolean): Promise<void> {
      if (!held) {
        held = true;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => (backgroundWork ? queued : interactive).push(resolve));
    },
    release,
    /** Waiters, for tests: interactive and background. */
    get waiting() {
      return { interactive: interactive.length, background: queued.length };
    },
  };
}
