import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Background work (ingestion) marks what it runs here, so that the embedded database can serve
 * everything else first: PGlite has one session, and a search that arrives behind a queue of
 * ingestion statements would otherwise wait for all of them (pglite.worker.ts orders its queue).
 */
const background = new AsyncLocalStorage<'work' | 'polling'>();

/**
 * Runs `work` with every embedded-database statement it issues queued after interactive ones.
 * `polling`: an idle worker looking for jobs, which does not make the database busy with
 * background work (`sinceBackgroundStatement`): the in-process worker asks every second, and
 * maintenance waited for a quiet that never came while it did.
 */
export const runInBackground = <T>(work: () => PromiseLike<T>, kind: 'work' | 'polling' = 'work'): Promise<T> =>
  // Awaited inside: a lazy query (drizzle's runs when first awaited) starts in the background too.
  background.run(kind, async () => await work());

/** Whether the caller is background work. */
export const inBackground = (): boolean => background.getStore() !== undefined;

let lastBackgroundStatement = -Infinity;
/** Records that background work sent the embedded database a statement (pglite-remote.ts). */
export const noteBackgroundStatement = (): void => {
  if (background.getStore() === 'work') lastBackgroundStatement = performance.now();
};
/** Milliseconds since background work last sent the embedded database a statement. */
export const sinceBackgroundStatement = (): number => performance.now() - lastBackgroundStatement;

let lastInteractiveStatement = -Infinity;
/** Records that anything but background work (a request) sent the embedded database a statement. */
export const noteInteractiveStatement = (): void => {
  lastInteractiveStatement = performance.now();
};
/** Milliseconds since anything but background work last sent the embedded database a statement. */
export const sinceInteractiveStatement = (): number => performance.now() - lastInteractiveStatement;

/**
 * Interactive work of several statements with gaps between them (a search: the collection, the
 * BM25 leg, the query embedding on another thread, then the ranked statement). While any runs,
 * background work is not given the embedded database, so a search waits at most for the one
 * background transaction already under way, not for one per gap. The embedded database listens;
 * on a PostgreSQL server (a pool of sessions) nothing needs to.
 */
let interactiveRuns = 0;
const listeners = new Set<(active: boolean) => void>();

export async function runInteractive<T>(work: () => PromiseLike<T>): Promise<T> {
  if (interactiveRuns++ === 0) for (const listener of listeners) listener(true);
  try {
    return await work();
  } finally {
    if (--interactiveRuns === 0) for (const listener of listeners) listener(false);
  }
}

/** Calls `listener(true)` when interactive work starts and `(false)` when none is left. */
export function onInteractive(listener: (active: boolean) => void): () => void {
  listeners.add(listener);
  if (interactiveRuns > 0) listener(true);
  return () => listeners.delete(listener);
}

/**
 * One holder at a time, interactive waiters before background ones (each in arrival order).
 * The embedded database's thread passes every statement and transaction outside a transaction
 * through it; a holder is never preempted.
 */
export function createPriorityGate() {
  const interactive: (() => void)[] = [];
  const queued: (() => void)[] = [];
  let held = false;
  /** Background waiters wait while interactive work is under way (see `runInteractive`). */
  let paused = false;

  const release = () => {
    const next = interactive.shift() ?? (paused ? undefined : queued.shift());
    if (next) next();
    else held = false;
  };

  return {
    /** Resolves when the caller holds the gate; it must call `release` once done. */
    acquire(backgroundWork: boolean): Promise<void> {
      if (!held && !(backgroundWork && paused)) {
        held = true;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => (backgroundWork ? queued : interactive).push(resolve));
    },
    release,
    /** Holds background waiters back (true) or lets them go again (false). */
    pauseBackground(on: boolean) {
      paused = on;
      if (!on && !held && queued.length > 0) {
        held = true;
        queued.shift()?.();
      }
    },
  };
}
