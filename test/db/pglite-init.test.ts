/**
 * Issue 14 (memory of the embedded default): a new data directory is created by a short-lived
 * process, so what PGlite's initdb leaves behind never stays in the server; the database runs with
 * 32 MB of shared buffers instead of PostgreSQL's 128 MB, all of which PGlite touches at start.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { openPglite, queryRows } from '../../src/db/client.ts';
import { sql } from '../../src/db/orm.ts';
import { initializeDataDir, isInitialized } from '../../src/db/pglite-init.ts';
import { until } from '../support/poll.ts';

const root = mkdtempSync(path.join(tmpdir(), 'ragport-pglite-init-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('a new embedded data directory', () => {
  it('is created by another process: this one does not grow by an initdb', async () => {
    const dir = path.join(root, 'not', 'yet', 'there');
    expect(isInitialized(dir)).toBe(false);
    const before = process.memoryUsage().rss;
    await initializeDataDir(dir);
    // initdb in this process costs several hundred MB (two PGlite instances); a child, nothing.
    expect((process.memoryUsage().rss - before) / 2 ** 20).toBeLessThan(100);
    expect(isInitialized(dir)).toBe(true);
  });

  it('opens, keeps what was written across a reopen, and runs with 32 MB of shared buffers', async () => {
    const dir = path.join(root, 'opened');
    const first = await openPglite(dir);
    await first.db.execute(sql`create table kept (v text)`);
    await first.db.execute(sql`insert into kept values ('written before the reopen')`);
    await first.close();
    expect(isInitialized(dir)).toBe(true);

    const again = await openPglite(dir);
    try {
      expect(await queryRows<{ v: string }>(again.db, sql`select v from kept`)).toEqual([
        { v: 'written before the reopen' },
      ]);
      expect(await queryRows(again.db, sql`show shared_buffers`)).toEqual([{ shared_buffers: '32MB' }]);
    } finally {
      await again.close();
    }
  });

  it('a creation killed half-way (a first start stopped with Ctrl-C) is redone by the next open', async () => {
    const dir = path.join(root, 'killed');
    const child = spawn(
      process.execPath,
      [fileURLToPath(new URL('../../src/db/pglite-init.ts', import.meta.url)), dir],
      { stdio: 'ignore' },
    );
    const exited = new Promise((resolve) => child.once('exit', resolve));
    // PGlite writes the files of initdb's result one by one, PG_VERSION among the last.
    await until('the first files', () => existsSync(dir) && readdirSync(dir).length > 0, {
      timeoutMs: 60_000,
      intervalMs: 5,
    });
    child.kill('SIGKILL');
    await exited;
    expect(isInitialized(dir)).toBe(false);

    const database = await openPglite(dir);
    try {
      await database.db.execute(sql`create table after_the_kill (v int)`);
      await database.db.execute(sql`insert into after_the_kill values (1)`);
      expect(await queryRows(database.db, sql`select v from after_the_kill`)).toEqual([{ v: 1 }]);
    } finally {
      await database.close();
    }
    expect(isInitialized(dir)).toBe(true);
  });

  it('fails with the directory and the cause when it cannot be created', async () => {
    const file = path.join(root, 'a-file');
    writeFileSync(file, 'not a directory');
    const dir = path.join(file, 'pg');
    await expect(initializeDataDir(dir)).rejects.toThrow(`creating the embedded database in ${dir} failed: ENOTDIR`);
    await expect(openPglite(dir)).rejects.toThrow(/ENOTDIR|not a directory/i);
  });
});
