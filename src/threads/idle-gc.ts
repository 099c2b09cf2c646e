import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * `gc` without --expose-gc for the whole process: exposed for one new context, then hidden again
 * so that no later context (a sandboxed program's) gets it. The flag is the process's: a thread
 * starting at the same moment (the bulk lane starts its model threads together) can hide it
 * between another's two steps, which then tries again.
 */
function exposedGc(): () => void {
  for (let attempt = 0; attempt < 1_000; attempt++) {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('typeof gc === "function" ? gc : undefined') as (() => void) | undefined;
    setFlagsFromString('--no-expose-gc');
    if (gc) return gc;
  }
  throw new Error('could not obtain gc(): --expose-gc kept being turned off by other threads');
}

/**
 * A full garbage collection once a worker thread has been idle for a moment. V8 collects when a
 * thread allocates, and an idle thread does not: the embedded database's thread kept the garbage
 * of opening and migrating the database (≈ 300 MB of transient buffers) for as long as nobody
 * queried it, where the same work on the server's thread was collected by the next request. The
 * collection runs on the worker's own thread, never the server's.
 */
export function createIdleCollector(delayMs = 2_000): { busy(): void; idle(): void } {
  const gc = exposedGc();
  let running = 0;
  let dirty = false;
  let timer: NodeJS.Timeout | undefined;
  return {
    busy() {
      running++;
      dirty = true;
      clearTimeout(timer);
    },
    idle() {
      running = Math.max(0, running - 1);
      if (running > 0 || !dirty) return;
      clearTimeout(timer);
      timer = setTimeout(() => {
        dirty = false;
        gc();
      }, delayMs);
      timer.unref();
    },
  };
}
