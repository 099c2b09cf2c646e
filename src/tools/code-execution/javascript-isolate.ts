import ivm from 'isolated-vm';
import { createInspect } from './inspect.ts';
import { captureBuiltins } from './inspect-builtins.ts';
import { createLayout } from './inspect-layout.ts';
import { installConsole } from './inspect-console.ts';
import { createStrings } from './inspect-strings.ts';
import { createOutputCollector, type ExecutionLimits, type ExecutionResult, type Sandbox } from './limits.ts';

/**
 * Runs inside the isolate before the user's code: `console` formats as Node does (inspect*.ts,
 * evaluated there from their source) and writes through the one host callback, under the
 * isolate's time and memory limits.
 */
const consoleSetup = `
  const builtins = (${String(captureBuiltins)})();
  const strings = (${String(createStrings)})(builtins);
  const layout = (${String(createLayout)})(builtins, strings);
  const inspector = (${String(createInspect)})(builtins, strings, layout, $1);
  (${String(installConsole)})(builtins, inspector, $0);
  // WebAssembly memory is allocated outside the V8 heap, so the isolate's memory limit does not
  // count it: one call could commit gigabytes inside the API process. No WebAssembly, then.
  delete globalThis.WebAssembly;
`;

/** Settles when the script's value does: a returned promise is awaited, anything else is not. */
const settle = 'return (async () => { await $0; })();';

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return `Uncaught ${String(error)}`;
}

/**
 * JavaScript in a fresh V8 isolate per call (isolated-vm): its own heap with a memory limit,
 * nothing of Node inside (no require, process, timers or network) and no WebAssembly, a wall-clock limit that
 * disposes the isolate, and console output through one host callback with a byte cap.
 *
 * In the process that calls it: the server runs it in a process of its own per run
 * (javascript.ts), since a V8 fatal error in an isolate (a Map grown past its largest size, an
 * allocation past the heap) ends the whole process. `onOutput` gets each piece of output kept,
 * as it is written.
 */
export function createIsolateSandbox(limits: ExecutionLimits, onOutput?: (kept: Buffer) => void): Sandbox {
  return {
    async run(job) {
      const started = performance.now();
      const isolate = new ivm.Isolate({ memoryLimit: limits.memoryMb });
      let timedOut = false;
      let killed = false;
      const stop = () => {
        killed = true;
        // Never dispose from inside a callback the isolate is waiting on.
        setImmediate(() => {
          if (!isolate.isDisposed) isolate.dispose();
        });
      };
      const output = createOutputCollector(limits.outputLimitBytes, stop, onOutput);
      const timer = setTimeout(() => {
        timedOut = true;
        stop();
      }, job.timeoutMs);
      job.signal.addEventListener('abort', stop, { once: true });
      let exitCode = 0;
      try {
        const context = await isolate.createContext();
        const write = new ivm.Callback((text: string) => output.write(String(text)));
        await context.evalClosure(consoleSetup, [write, limits.outputLimitBytes], { timeout: job.timeoutMs });
        const script = await isolate.compileScript(job.code, { filename: 'main.js' });
        const value = await script.run(context, { reference: true, timeout: job.timeoutMs });
        await context.evalClosure(settle, [value.derefInto()], { timeout: job.timeoutMs, result: { promise: true } });
      } catch (error) {
        exitCode = 1;
        if (timedOut || killed) {
          exitCode = 137;
        } else if (isolate.isDisposed) {
          // isolated-vm disposes an isolate that went over its memory limit.
          exitCode = 137;
          output.write(`RangeError: memory limit of ${limits.memoryMb} MB exceeded\n`);
        } else if (error instanceof Error && /timed out/i.test(error.message)) {
          timedOut = true;
          exitCode = 137;
        } else {
          output.write(`${describe(error)}\n`);
        }
      } finally {
        clearTimeout(timer);
        job.signal.removeEventListener('abort', stop);
        if (!isolate.isDisposed) isolate.dispose();
      }
      // Stopped at the output cap (or by its caller) even when the program ended before the
      // isolate was disposed: it did not finish on its own.
      if (killed && exitCode === 0) exitCode = 137;
      return {
        output: output.text(),
        exit_code: exitCode,
        timed_out: timedOut,
        duration_ms: Math.round(performance.now() - started),
        truncated: output.truncated,
      } satisfies ExecutionResult;
    },
  };
}
