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
};

/**
 * Collects output up to a byte cap. The first write that crosses it keeps what fits, flags the
 * result truncated and calls `onOverflow` once (the runner then stops the program).
 */
export function createOutputCollector(limitBytes: number, onOverflow: () => void) {
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  return {
    write(chunk: Buffer | string): void {
      if (truncated) return;
      const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      if (size + buffer.length > limitBytes) {
        chunks.push(buffer.subarray(0, limitBytes - size));
        size = limitBytes;
        truncated = true;
        onOverflow();
        return;
      }
      chunks.push(buffer);
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
