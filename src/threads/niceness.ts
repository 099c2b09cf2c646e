import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';

/**
 * Lowers the calling thread's priority to `niceness` (Linux: a thread's id is a pid to
 * setpriority). Threads inherit their creator's niceness, so threads a library starts from this
 * one (ONNX Runtime's) run at it too. Elsewhere, or where not permitted, nothing changes.
 */
export function lowerThreadPriority(niceness: number): void {
  if (niceness === 0) return;
  try {
    setPriority(Number(readlinkSync('/proc/thread-self').split('/').at(-1)), niceness);
  } catch {
    // not Linux, or not permitted
  }
}
