/**
 * A new embedded data directory is created in a short-lived process of its own. PGlite runs
 * initdb in a second, in-memory PGlite next to the one it opens; what that leaves behind stays in
 * the process that ran it, even after a garbage collection and after both are closed (measured:
 * the server once ready 877 MB on a new directory, 574 MB on an existing one, 614 against 553 MB
 * still after its idle collection; initdb run in a worker thread that then exited left more, not
 * less). Run here, it goes away with this process and the server opens an existing directory.
 *
 *   node src/db/pglite-init.ts <dir>       (what initializeDataDir runs)
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';

const script = fileURLToPath(import.meta.url);

/**
 * PostgreSQL's default 128 MB of shared buffers are touched at start in PGlite's memory: the
 * embedded database's thread took ~300 MB once open, ~130 MB with 32 MB. The operating system's
 * page cache holds what the buffers do not, and reading a page from it costs little: with SciFact
 * (11,450 chunks) searches and ingestion measured the same with 16, 32, 64 and 128 MB
 * (docs/operations.md, Sizing).
 */
export const startParams = [...PGlite.defaultStartParams, '-c', 'shared_buffers=32MB'];

/** PGlite's own test for a directory that holds a database. */
export const isInitialized = (dir: string): boolean => existsSync(path.join(dir, 'PG_VERSION'));

/** Creates the database in `dir` (which holds none yet) in a child process, and waits for it. */
export function initializeDataDir(dir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [script, dir], { encoding: 'utf8' }, (error, _stdout, stderr) => {
      if (!error && isInitialized(dir)) return resolve();
      const detail = stderr.trim().split('\n').at(-1) ?? '';
      const cause = error ? detail || error.message : 'it finished without creating PG_VERSION';
      reject(new Error(`creating the embedded database in ${dir} failed: ${cause}`));
    });
  });
}

if (process.argv[1] === script) {
  const dir = process.argv[2];
  if (!dir) throw new Error('usage: pglite-init.ts <dir>');
  try {
    mkdirSync(dir, { recursive: true });
    const pg = await PGlite.create({ dataDir: dir, startParams });
    await pg.close();
  } catch (error) {
    // One line, the cause: the server's error quotes this process's last line of stderr.
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  }
}
