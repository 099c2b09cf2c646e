import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';
import { readdirSync, readFileSync } from 'node:fs';
import { until } from './poll.ts';

const root = path.resolve(import.meta.dirname, '../..');

/** A ragport entrypoint (`src/server.ts`, `src/worker.ts`) running as a child process. */
export interface RagportProcess {
  readonly child: ChildProcess;
  /** Everything it wrote to stdout and stderr so far. */
  output(): string;
  /** Resolves when it exits. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends the signal and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** A TCP port nobody listens on right now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** Test-runner variables that must not leak into a child's configuration. */
const inherited = () => {
  const env = { ...process.env };
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'PORT', 'METRICS_PORT', 'METRICS_TOKEN', 'RAGPORT_CONFIG']) {
    delete env[name];
  }
  return env;
};

export function spawnRagport(
  script: 'server' | 'worker',
  env: Record<string, string>,
  /** Descriptors the child inherits at these numbers, as a shell's `100</file` would pass them. */
  extraFds: Record<number, number> = {},
): RagportProcess {
  const highest = Math.max(2, ...Object.keys(extraFds).map(Number));
  const stdio = Array.from({ length: highest + 1 }, (_v, fd) =>
    fd === 0 ? 'ignore' : fd <= 2 ? 'pipe' : (extraFds[fd] ?? 'ignore'),
  );
  const child = spawn(process.execPath, [path.join(root, 'src', `${script}.ts`)], {
    cwd: root,
    env: { ...inherited(), HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio,
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    output: () => output,
    exited,
    stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Polls until `probe` resolves true; fails with the process output when it exits or time runs out. */
export async function waitUntil(
  what: string,
  probe: () => Promise<boolean>,
  options: { process?: RagportProcess; timeoutMs?: number } = {},
): Promise<void> {
  const child = options.process?.child;
  await until(
    what,
    async () => {
      if (await probe().catch(() => false)) return true;
      if (child && (child.exitCode !== null || child.signalCode !== null)) {
        throw new Error(
          `${what}: the process exited (${child.exitCode ?? child.signalCode})\n${options.process?.output()}`,
        );
      }
      return false;
    },
    { timeoutMs: options.timeoutMs ?? 90_000, intervalMs: 100, detail: () => options.process?.output() ?? '' },
  );
}

/** Starts `node src/server.ts` on a free port and waits until it is ready. */
export async function startServerProcess(env: Record<string, string>): Promise<RagportProcess & { url: string }> {
  const port = await freePort();
  const server = spawnRagport('server', { PORT: String(port), ...env });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitUntil(`server on ${port} ready`, async () => (await fetch(`${url}/readyz`)).status === 200, {
      process: server,
    });
  } catch (error) {
    // A server that never became ready is not left running after the test that started it.
    await server.stop('SIGKILL');
    throw error;
  }
  return Object.assign(server, { url });
}

const read = (path: string): string | undefined => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined; // gone meanwhile
  }
};

/**
 * State, parent and niceness of a process ("pid (comm) state ppid …", niceness the 19th field;
 * comm may hold spaces and parentheses).
 */
function stateOf(pid: string | number): { state: string; ppid: number; niceness: number } | undefined {
  const stat = read(`/proc/${pid}/stat`);
  if (stat === undefined) return undefined;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0] ?? '', ppid: Number(fields[1]), niceness: Number(fields[16]) };
}

/** A process's scheduling niceness. */
export const nicenessOf = (pid: number): number | undefined => stateOf(pid)?.niceness;

/** Whether a process runs: not gone, and not a zombie waiting to be reaped. */
export const alive = (pid: number): boolean => {
  const state = stateOf(pid)?.state;
  return state !== undefined && state !== 'Z';
};

/** Every live process (zombies, exited and not yet reaped, do not count) with its parent, from one pass over /proc. */
function liveProcesses(): { pid: number; ppid: number }[] {
  const live: { pid: number; ppid: number }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const proc = stateOf(entry);
    if (proc !== undefined && proc.state !== 'Z') live.push({ pid: Number(entry), ppid: proc.ppid });
  }
  return live;
}

const runs = (pid: number, commandLine: string | undefined) =>
  commandLine === undefined || (read(`/proc/${pid}/cmdline`) ?? '').includes(commandLine);

/**
 * Live child processes of `parent` (this process by default) from /proc, optionally only those
 * whose command line contains `commandLine`.
 */
export function childPids(parent = process.pid, commandLine?: string): number[] {
  return liveProcesses()
    .filter((p) => p.ppid === parent && runs(p.pid, commandLine))
    .map((p) => p.pid);
}

/** Live processes below `root` (children, their children, …), optionally filtered as childPids. */
export function descendantPids(root = process.pid, commandLine?: string): number[] {
  const live = liveProcesses();
  const found: number[] = [];
  const parents = [root];
  for (let parent = parents.pop(); parent !== undefined; parent = parents.pop()) {
    for (const { pid, ppid } of live) {
      if (ppid !== parent) continue;
      parents.push(pid);
      if (runs(pid, commandLine)) found.push(pid);
    }
  }
  return found;
}

/** This process's document parser processes (forked by its process spawner). */
export const parserPids = (): number[] => descendantPids(process.pid, 'parse-process.ts');
