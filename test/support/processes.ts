import { execFileSync } from 'node:child_process';

/** Child processes of `parent` (this process by default), optionally only those whose command line matches. */
export function childPids(parent = process.pid, commandLine?: string): number[] {
  try {
    const args = ['-P', String(parent), ...(commandLine === undefined ? [] : ['-f', commandLine])];
    return execFileSync('pgrep', args, { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

/** This process's document parser processes. */
export const parserPids = (): number[] => childPids(process.pid, 'parse-process.ts');
