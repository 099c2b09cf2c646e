import { join } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { CodeExecutionConfig } from '../../config.ts';
import type { ReadinessCheck } from '../../health/health.routes.ts';
import { AppError } from '../../errors.ts';
import { shuttingDown } from '../../http/abort.ts';
import type { Tool } from '../tool.types.ts';
import { createJavaScriptSandbox } from './javascript.ts';
import type { Sandbox } from './limits.ts';
import { createRunBudget, type RunBudget } from './budget.ts';
import type { Spawner } from '../../processes/spawner.ts';
import { createPythonSandbox, findHostTools } from './python.ts';
import { createSlotQueue } from './queue.ts';
import { ensureSeccompFilter } from './seccomp.ts';

export const codeExecutionParameters = z.object({
  code: z.string().min(1).max(200_000),
  language: z.enum(['python', 'javascript']).default('python'),
  timeout: z.number().int().min(1).max(60).default(30),
});

export const codeExecutionResult = z.object({
  output: z.string(),
  exit_code: z.number().int(),
  timed_out: z.boolean(),
  duration_ms: z.number().int(),
  truncated: z.boolean(),
});

export type CodeExecutionParameters = z.infer<typeof codeExecutionParameters>;
export type CodeExecutionResult = z.infer<typeof codeExecutionResult>;

type PythonAvailability = { ok: true; sandbox: Sandbox; budget: RunBudget['mode'] } | { ok: false; reason: string };

/**
 * Finds the host tools, builds the seccomp filter and runs one trivial program in the sandbox.
 * Any failure disables Python: it never runs unsandboxed.
 */
async function preparePython(
  config: CodeExecutionConfig,
  cacheDir: string,
  spawner: Spawner,
): Promise<PythonAvailability> {
  try {
    const tools = await findHostTools();
    const seccompPath = await ensureSeccompFilter(cacheDir);
    // The probe has a slot (and uid) of its own, beyond the job slots.
    const budget = createRunBudget({
      memoryMb: config.memoryMb,
      slots: config.concurrency + 1,
      uidBase: config.uidBase,
    });
    const sandbox = createPythonSandbox(tools, { ...config, seccompPath, budget, spawner });
    const probe = await sandbox.run({
      code: 'print(6 * 7)',
      timeoutMs: 15_000,
      slot: config.concurrency, // a uid of its own, beyond the job slots
      signal: new AbortController().signal,
    });
    if (probe.exit_code !== 0 || probe.output !== '42\n') {
      const detail = probe.output.trim().split('\n').slice(-1)[0] ?? '';
      return { ok: false, reason: `the sandbox does not start (exit ${probe.exit_code}): ${detail.slice(0, 200)}` };
    }
    return { ok: true, sandbox, budget: budget.mode };
  } catch (error) {
    return { ok: false, reason: (error as Error).message };
  }
}

export interface CodeExecutionDeps {
  config: CodeExecutionConfig;
  /** Where the compiled seccomp filter is cached (`<DATA_DIR>/sandbox`). */
  dataDir: string;
  logger: Logger;
  /** Forks the sandboxed Python programs and JavaScript runs' processes (processes/spawner.ts). */
  spawner: Spawner;
}

export function createCodeExecution(deps: CodeExecutionDeps) {
  const { config, logger } = deps;
  const share = {
    maxWaiting: config.queueSize,
    perKeyRunning: config.perKeyRunning,
    perKeyWaiting: config.perKeyQueue,
  };
  const queues = {
    python: createSlotQueue({ slots: config.concurrency, ...share }),
    javascript: createSlotQueue({ slots: config.jsConcurrency, ...share }),
  };
  const javascript = createJavaScriptSandbox(config, deps.spawner);
  const python = preparePython(config, join(deps.dataDir, 'sandbox'), deps.spawner).then((availability) => {
    if (availability.ok) {
      logger.info(`code_execution: Python sandbox ready (bubblewrap, seccomp; per-run budget: ${availability.budget})`);
    } else logger.warn({ reason: availability.reason }, 'code_execution: Python disabled, the sandbox is unavailable');
    return availability;
  });

  const tool: Tool<CodeExecutionParameters, CodeExecutionResult> = {
    name: 'code_execution',
    description: 'runs Python or JavaScript in a sandbox with no network and bounded resources',
    parameters: codeExecutionParameters,
    result: codeExecutionResult,
    enabled: () => true,
    async run(parameters, context) {
      let sandbox = javascript;
      if (parameters.language === 'python') {
        const availability = await python;
        if (!availability.ok) {
          throw new AppError({
            code: 'service_unavailable',
            message: 'Python execution is unavailable: this host cannot provide its sandbox',
          });
        }
        sandbox = availability.sandbox;
      }
      const queue = queues[parameters.language];
      const key = context.principal.keyId;
      const waiting = queue.acquire(key, context.signal);
      if (!waiting) {
        throw new AppError({
          code: 'capacity_exceeded',
          message: 'Too many code executions in progress, retry later',
          headers: { 'retry-after': '1' },
        });
      }
      // The wait ends with the request: a client gone, or the shutdown deadline (then 503, not 500).
      const slot = await waiting.catch((error: unknown) => {
        if (context.signal.aborted && !(error instanceof AppError)) throw shuttingDown();
        throw error;
      });
      try {
        const result = await sandbox.run({
          code: parameters.code,
          timeoutMs: parameters.timeout * 1000,
          slot,
          signal: context.signal,
        });
        const { exit_code, timed_out, duration_ms, truncated } = result;
        logger.info({ language: parameters.language, exit_code, timed_out, duration_ms, truncated }, 'code_execution');
        return result;
      } finally {
        queue.release(key, slot);
      }
    },
  };

  const readiness: ReadinessCheck = {
    name: 'code_execution_python',
    critical: false,
    check: async () => {
      const availability = await python;
      return availability.ok
        ? { ok: true, detail: `sandboxed (bubblewrap, seccomp; per-run budget: ${availability.budget})` }
        : { ok: false, detail: `disabled: ${availability.reason}` };
    },
  };

  /** Resolves once the start-up probe is done (so closing never leaves it running). */
  const settled = () => python.then(() => undefined);

  return { tool, readiness, settled };
}
