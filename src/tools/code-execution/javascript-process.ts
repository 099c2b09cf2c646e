/**
 * A JavaScript run's own process (forked per run by javascript.ts): runs one program in an
 * isolate, sends its output as it is written and then its result, and exits. A V8 fatal error in
 * the isolate, which no limit of isolated-vm prevents, ends this process, not the server. It holds
 * no secrets (its environment is empty) and exits when its parent goes away.
 */
import { createIsolateSandbox } from './javascript-isolate.ts';
import type { ExecutionLimits, ExecutionResult } from './limits.ts';

export interface JavaScriptTask {
  code: string;
  timeoutMs: number;
  limits: ExecutionLimits;
}

export type JavaScriptReply =
  { type: 'ready' } | { type: 'output'; data: Uint8Array } | { type: 'result'; result: ExecutionResult };

const send = (reply: JavaScriptReply): void => {
  process.send?.(reply);
};

async function run(task: JavaScriptTask): Promise<void> {
  const sandbox = createIsolateSandbox(task.limits, (kept) => send({ type: 'output', data: kept }));
  const result = await sandbox.run({
    code: task.code,
    timeoutMs: task.timeoutMs,
    slot: 0,
    signal: new AbortController().signal,
  });
  send({ type: 'result', result });
  process.disconnect();
}

if (process.send === undefined) {
  process.stderr.write('javascript-process.ts is started by the code_execution tool, not by hand\n');
  process.exit(2);
}
process.on('disconnect', () => process.exit(0));
// A signal to the server's whole process group (Ctrl-C, systemd stopping the unit) is the server's
// to handle: it drains, then ends this process. Dying now would fail a run the drain would finish.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => undefined);
process.once('message', (task: JavaScriptTask) => void run(task));
send({ type: 'ready' });
