import { execFile, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, utimesSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { DataDirLockedError, LOCK_FILE, lockDataDir } from '../../src/db/data-dir-lock.ts';
import { randomBase62 } from '../../src/db/ids.ts';
import { scratchDirs } from '../support/scratch.ts';
import { call } from '../support/http.ts';
import { startServerProcess, spawnRagport } from '../support/processes.ts';

const run = promisify(execFile);
const cli = path.resolve(import.meta.dirname, '../../src/keys/keys.cli.ts');
const freshDir = scratchDirs('ragport-lock-');

/** A pid that belonged to a process that has exited. */
const deadPid = (): number => {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(child.stdout);
};

describe('the data directory lock', () => {
  it('refuses a second holder, also in the same process, until released', () => {
    const dir = freshDir();
    const lock = lockDataDir(dir);
    const record = JSON.parse(readFileSync(path.join(dir, LOCK_FILE), 'utf8')) as { pid: number };
    expect(record.pid).toBe(process.pid);
    expect(() => lockDataDir(dir)).toThrow(DataDirLockedError);
    expect(() => lockDataDir(dir)).toThrow(`is in use by process ${process.pid}`);
    lock.release();
    expect(existsSync(path.join(dir, LOCK_FILE))).toBe(false);
    lockDataDir(dir).release();
  });

  it('takes over a lock whose owner on this host is gone', () => {
    const dir = freshDir();
    const lockFile = path.join(dir, LOCK_FILE);
    // A lock as a crashed owner on this host leaves it: ours, with the pid of an exited process.
    const owner = lockDataDir(dir);
    const own = JSON.parse(readFileSync(lockFile, 'utf8')) as Record<string, unknown>;
    owner.release();
    writeFileSync(lockFile, JSON.stringify({ ...own, pid: deadPid() }));
    const lock = lockDataDir(dir);
    expect((JSON.parse(readFileSync(lockFile, 'utf8')) as { pid: number }).pid).toBe(process.pid);
    lock.release();
  });

  it('waits for a lock of another host to go stale before taking it over', () => {
    const dir = freshDir();
    const lockFile = path.join(dir, LOCK_FILE);
    const foreign = { pid: 1, host: `elsewhere-${randomBase62(6)}`, start: null, command: 'src/server.ts', since: 'x' };
    writeFileSync(lockFile, JSON.stringify(foreign));
    expect(() => lockDataDir(dir)).toThrow(`process 1 on host ${foreign.host}`);
    const old = new Date(Date.now() - 60_000);
    utimesSync(lockFile, old, old);
    lockDataDir(dir).release();
  });

  it('an empty lock file (a writer killed half way) is waited for briefly, then taken over', () => {
    const dir = freshDir();
    const lockFile = path.join(dir, LOCK_FILE);
    writeFileSync(lockFile, '');
    expect(() => lockDataDir(dir)).toThrow('a lock being written');
    const old = new Date(Date.now() - 3_000);
    utimesSync(lockFile, old, old);
    const lock = lockDataDir(dir);
    expect((JSON.parse(readFileSync(lockFile, 'utf8')) as { pid: number }).pid).toBe(process.pid);
    lock.release();
  });

  it('appears whole: written aside and linked into place, leaving nothing else behind', () => {
    const dir = freshDir();
    const lock = lockDataDir(dir);
    expect(readdirSync(dir)).toEqual([LOCK_FILE]);
    expect(JSON.parse(readFileSync(path.join(dir, LOCK_FILE), 'utf8'))).toMatchObject({ pid: process.pid });
    lock.release();
    expect(readdirSync(dir)).toEqual([]);
  });
});

// Starts real processes on one embedded data directory (each loads PGlite and the model).
describe('a second process on the same DATA_DIR', { timeout: 240_000 }, () => {
  it('is refused at once (the keys CLI, a second server), and nothing is lost', async () => {
    const dataDir = freshDir();
    const adminKey = `admin_${randomBase62(40)}`;
    const env = { DATA_DIR: dataDir, DATABASE_URL: '', RAGPORT_ADMIN_KEY: adminKey };
    const server = await startServerProcess(env);
    try {
      const keysCli = (...args: string[]) => run(process.execPath, [cli, ...args], { env: { ...process.env, ...env } });
      const refused = keysCli('create', '--name', 'lost', '--scopes', 'read');
      await expect(refused).rejects.toMatchObject({
        code: 1,
        stdout: '',
        stderr: expect.stringContaining(`is in use by process ${server.child.pid}`),
      });

      const second = spawnRagport('server', { ...env, PORT: '0' });
      expect((await second.exited).code).toBe(1);
      expect(second.output()).toContain(`is in use by process ${server.child.pid}`);

      // The running server still owns its data, and the key made through it stays.
      const response = await call(server.url, '/api/v1/keys', {
        method: 'POST',
        key: adminKey,
        json: { name: 'kept', scopes: ['read'] },
      });
      expect(response.status).toBe(201);
      expect((await server.stop('SIGTERM')).code).toBe(0);
      expect(existsSync(path.join(dataDir, LOCK_FILE))).toBe(false);

      // Once the server is stopped the CLI owns the directory and sees that key.
      const { stdout } = await keysCli('list');
      expect(stdout).toContain('"kept"');
    } finally {
      await server.stop('SIGKILL');
    }
  });
});
