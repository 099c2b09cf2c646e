import { readdirSync, readFileSync } from 'node:fs';

const read = (path: string): string | undefined => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined; // gone meanwhile
  }
};

/** State and parent of a process ("pid (comm) state ppid …"; comm may hold spaces and parentheses). */
function stateOf(pid: string | number): { state: string; ppid: number } | undefined {
  const stat = read(`/proc/${pid}/stat`);
  if (stat === undefined) return undefined;
  const [state = '', ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { state, ppid: Number(ppid) };
}

/** Whether a process runs: not gone, and not a zombie waiting to be reaped. */
export const alive = (pid: number): boolean => {
  const state = stateOf(pid)?.state;
  return state !== undefined && state !== 'Z';
};

/**
 * Live child processes of `parent` (this process by default) from /proc, optionally only those
 * whose command line contains `commandLine`. Zombies (exited, not yet reaped) do not count.
 */
export function childPids(parent = process.pid, commandLine?: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const proc = stateOf(entry);
    if (proc?.ppid !== parent || proc.state === 'Z') continue;
    if (commandLine !== undefined && !(read(`/proc/${entry}/cmdline`) ?? '').includes(commandLine)) continue;
    pids.push(Number(entry));
  }
  return pids;
}

/** This process's document parser processes. */
export const parserPids = (): number[] => childPids(process.pid, 'parse-process.ts');
