import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { SpawnedChild, Spawner } from '../../processes/spawner.ts';
import type { JavaScriptReply, JavaScriptTask } from './javascript-process.ts';
import type { ExecutionLimits, ExecutionResult, Sandbox } from './limits.ts';

const script = fileURLToPath(new URL('./javascript-process.ts', import.meta.url));

/** Beyond the program's own timeout: the process's start and the isolate's disposal. */
const GRACE_MS = 3_000;
/** The run's process's own heap: output copied out of the isolate and little else. */
const PROCESS_HEAP_MB = 128;
const SPARE_IDLE_MS = 60_000;
/** Node itself in a run's process: ~80 MB resident before the program starts. */
const PROCESS_BASE_MB = 128;
const WATCH_INTERVAL_MS = 50;

/**
 * A process's resident memory, from /proc (undefined once it is gone, or off Linux). Read from the
 * server, so it works while the run's own thread is held (a getter that never returns).
 */
function residentBytes(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const kb = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

/**
 * JavaScript in an isolate (javascript-isolate.ts) inside a process of its own per run, forked by
 * the spawner. A V8 fatal error in the isolate (a Map or an array grown past V8's largest size,
 * an allocation past the heap: isolated-vm's memory limit is not a hard one) ends that process
 * alone, and the run reports it. A program that holds its isolate past the timeout (a thrown value
 * whose getters never return, read outside the isolate's timer) is killed with its process at
 * the timeout plus a grace, so its slot is freed and no core keeps spinning. The process as a whole
 * is held to the isolate's limit plus its own heap and Node's base: before V8 gave up on a growing
 * array, a run's process reached 1.2–1.5 GB with a 256 MB limit.
 */
export function createJavaScriptSandbox(limits: ExecutionLimits, spawner: Spawner): Sandbox {
  const processLimitBytes = (limits.memoryMb + PROCESS_HEAP_MB + PROCESS_BASE_MB) * 2 ** 20;
  interface RunProcess {
    child: SpawnedChild;
    /** True once it can take a program; false if it ended before. */
    ready: Promise<boolean>;
  }
  const launch = (): RunProcess => {
    const child = spawner.fork(script, {
      // The program needs nothing from the environment, and secrets stay out of it.
      env: {},
      execArgv: [`--max-old-space-size=${PROCESS_HEAP_MB}`],
    });
    const ready = new Promise<boolean>((resolve) => {
      child.on('message', (message) => {
        if ((message as JavaScriptReply).type === 'ready') resolve(true);
      });
      child.once('exit', () => resolve(false));
    });
    return { child, ready };
  };
  // One process started ahead, so a run does not wait ~100 ms for Node to start; it is ended
  // after a minute unused.
  let spare: RunProcess | undefined;
  let spareTimer: NodeJS.Timeout | undefined;
  const take = (): RunProcess => {
    const taken = spare !== undefined && spare.child.alive ? spare : launch();
    spare = launch();
    clearTimeout(spareTimer);
    const idle = spare;
    spareTimer = setTimeout(() => {
      if (spare === idle) spare = undefined;
      idle.child.kill('SIGKILL');
    }, SPARE_IDLE_MS);
    spareTimer.unref();
    return taken;
  };

  return {
    run(job) {
      const started = performance.now();
      const chunks: Buffer[] = [];
      let size = 0;
      let settled = false;
      let stoppedBy: 'deadline' | 'abort' | 'memory' | undefined;
      let resident = 0;
      const { child, ready } = take();
      const stop = (why: 'deadline' | 'abort' | 'memory') => {
        stoppedBy ??= why;
        child.kill('SIGKILL');
      };
      const watch = setInterval(() => {
        resident = residentBytes(child.pid) ?? resident;
        if (resident > processLimitBytes) stop('memory');
      }, WATCH_INTERVAL_MS);
      const deadline = setTimeout(() => stop('deadline'), job.timeoutMs + GRACE_MS);
      const onAbort = () => stop('abort');
      job.signal.addEventListener('abort', onAbort, { once: true });
      if (job.signal.aborted) onAbort();

      void ready.then((ok) => {
        if (ok) {
          child.send({ code: job.code, timeoutMs: job.timeoutMs, limits } satisfies JavaScriptTask);
        }
      });

      return new Promise<ExecutionResult>((resolve) => {
        const finish = (value: Omit<ExecutionResult, 'duration_ms'>) => {
          settled = true;
          clearTimeout(deadline);
          clearInterval(watch);
          job.signal.removeEventListener('abort', onAbort);
          resolve({ ...value, duration_ms: Math.round(performance.now() - started) });
        };
        child.on('message', (message) => {
          const reply = message as JavaScriptReply;
          if (reply.type === 'output') {
            const data = Buffer.from(reply.data);
            // The process caps its output; this holds the parent to the same cap whatever it sends.
            if (size + data.length <= limits.outputLimitBytes) {
              chunks.push(data);
              size += data.length;
            }
          } else if (reply.type === 'result') {
            // Answered now: the process exits on its own, and is killed should it linger.
            finish(reply.result);
            child.kill('SIGKILL');
          }
        });
        child.once('exit', (code, signal, error) => {
          if (settled) return;
          let output = new TextDecoder('utf-8', { fatal: false }).decode(Buffer.concat(chunks));
          if (stoppedBy === 'memory') {
            output += `RangeError: memory limit of ${limits.memoryMb} MB exceeded (the run's process held ${Math.round(resident / 2 ** 20)} MB, more than the ${processLimitBytes / 2 ** 20} MB allowed it)\n`;
          } else if (stoppedBy === undefined) {
            output +=
              error !== undefined
                ? `Error: the run was stopped: ${error}\n`
                : `RangeError: the program was stopped by V8 (${signal ?? `exit code ${code}`}), most often for memory beyond the limit of ${limits.memoryMb} MB\n`;
          }
          finish({
            output,
            exit_code: 137,
            timed_out: stoppedBy === 'deadline',
            truncated: size >= limits.outputLimitBytes,
          });
        });
      });
    },
  };
}
