/** What every run reports, whichever language: the response body of code_execution. */
export interface ExecutionResult {
  output: string;
  /** The exit status, or 128 + signal when the program was killed (137: SIGKILL, 152: SIGXCPU). */
  exit_code: number;
  timed_out: boolean;
  duration_ms: number;
  /** Output went past the byte cap: it was cut there and the program was stopped. */
  truncated: boolean;
}

export interface ExecutionJob {
  code: string;
  timeoutMs: number;
  /** Which slot of the concurrency pool runs the job (selects the sandbox uid). */
  slot: number;
  signal: AbortSignal;
}

/** A way to run untrusted code; each language has one. */
export interface Sandbox {
  run(job: ExecutionJob): Promise<ExecutionResult>;
}

export interface ExecutionLimits {
  memoryMb: number;
  outputLimitBytes: number;
}

/** Fixed limits of the Python sandbox beyond those in the configuration. */
export const pythonLimits = {
  /** Processes and threads of one job, counted per sandbox uid (bwrap's own two included). */
  processes: 64,
  openFiles: 128,
  /** Largest single file, and the size of the job's only writable tmpfs (/tmp). */
  fileBytes: 16 * 1024 * 1024,
  tmpfsBytes: 32 * 1024 * 1024,
  /** Files and directories in each of /tmp and /dev/shm (as root; see launcher.py). */
  tmpfsInodes: 4_096,
  /** CPU seconds beyond the wall timeout before SIGXCPU; the wall clock normally fires first. */
  cpuGraceSeconds: 1,
  /**
   * RLIMIT_STACK, which glibc also takes as every thread's stack size, reserved whole in the
   * address space the moment a thread starts. At the default 8 MB, and with the 64 MB malloc arena
   * a thread reserves on its first allocation, each thread took 72 MB of a 256 MB RLIMIT_AS: a run
   * could start 6. At 1 MB (and one arena, MALLOC_ARENA_MAX in python.ts) a thread costs 1 MB, so
   * the 61 threads pids.max leaves take a quarter of the default budget. (Dropping RLIMIT_AS for the
   * cgroup alone was rejected: it turns one oversized allocation into a MemoryError the program
   * can read rather than an OOM kill.) Measured with Python 3.11: 1 MB holds ~1,400 nested
   * `__init__` calls or ~5,700 nested lists in `repr` (8 MB: ~11,400 and ~47,000), well beyond the
   * 1,000 frames of Python's default recursion limit (512 KB was enough for those; 256 KB crashed
   * one); pure Python recursion does not use the C stack (300,000 levels ran).
   */
  stackBytes: 1024 * 1024,
  /**
   * The hard stack limit, so a program that needs deep C recursion in its main thread can raise
   * its own soft limit (`resource.setrlimit`): the kernel checks it as the stack grows, and the
   * memory budget still bounds it. Threads keep the size glibc read at start.
   */
  stackHardBytes: 8 * 1024 * 1024,
};

/**
 * Collects output up to a byte cap. The first write that crosses it keeps what fits, flags the
 * result truncated and calls `onOverflow` once (the runner then stops the program).
 */
export function createOutputCollector(limitBytes: number, onOverflow: () => void, onKept?: (kept: Buffer) => void) {
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  return {
    write(chunk: Buffer | string): void {
      if (truncated) return;
      // A character is at least one byte: a string is cut to what can fit before it is encoded, so a
      // gigabyte written at once is not copied whole.
      const room = limitBytes - size;
      const buffer =
        typeof chunk === 'string' ? Buffer.from(chunk.length > room + 1 ? chunk.slice(0, room + 1) : chunk) : chunk;
      if (size + buffer.length > limitBytes) {
        const kept = buffer.subarray(0, room);
        chunks.push(kept);
        onKept?.(kept);
        size = limitBytes;
        truncated = true;
        onOverflow();
        return;
      }
      chunks.push(buffer);
      onKept?.(buffer);
      size += buffer.length;
    },
    get truncated(): boolean {
      return truncated;
    },
    /** Invalid UTF-8 (and a character cut by the cap) becomes U+FFFD. */
    text(): string {
      return new TextDecoder('utf-8', { fatal: false }).decode(Buffer.concat(chunks));
    },
  };
}
