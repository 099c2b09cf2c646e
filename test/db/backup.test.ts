/**
 * The embedded database's online backup below HTTP (`Database.beginBackup` and the archive made
 * from the live data directory): writes made while the files are being read, and while backup
 * mode ends, are in the restored database, whole.
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { archiveDataDir } from '../../src/backup/archive.ts';
import { openPglite } from '../../src/db/client.ts';
import { sql } from '../../src/db/orm.ts';
import { scratchDirs } from '../support/scratch.ts';

const run = promisify(execFile);
const scratch = scratchDirs('ragport-db-backup-');

describe('online backup of the embedded database', { timeout: 120_000 }, () => {
  it('restores to a consistent state that has what was written while it was read', async () => {
    const dir = path.join(scratch(), 'pg');
    const database = await openPglite(dir);
    await database.migrate();
    const { db } = database;
    await db.execute(sql`create table before_backup (id int primary key, note text)`);
    await db.execute(sql`insert into before_backup select g, repeat('b', 100) from generate_series(1, 5000) g`);

    const backup = await database.beginBackup?.();
    if (!backup) throw new Error('a data directory of its own: beginBackup expected');
    expect(backup.heldMs).toBeGreaterThan(0);
    let ended = false;
    const archive = archiveDataDir(backup.dataDir, async () => {
      // After the data files, before backup mode ends: in the log the archive takes next.
      await db.execute(sql`update before_backup set note = 'while ending' where id <= 10`);
      const label = await backup.end();
      ended = true;
      return label;
    });
    const pieces: Buffer[] = [];
    let writtenWhileRead = false;
    for await (const piece of archive) {
      pieces.push(piece as Buffer);
      if (writtenWhileRead) continue;
      // The archive makes a piece only when asked: the data files are still being read.
      expect(ended).toBe(false);
      await db.execute(sql`create table during_backup (id int primary key)`);
      await db.execute(sql`insert into during_backup select generate_series(1, 20000)`);
      await db.execute(sql`delete from before_backup where id > 4000`);
      // A checkpoint mid-backup may recycle the log: the backup's replication slot keeps what the
      // restore replays.
      await db.execute(sql`checkpoint`);
      writtenWhileRead = true;
    }
    expect(ended).toBe(true);
    // Ending twice is ending once (the service ends it again when a download finishes).
    await expect(backup.end()).resolves.toContain('START WAL LOCATION');
    // After the download: not in it.
    await db.execute(sql`insert into during_backup values (20001)`);
    await database.close();

    const file = path.join(scratch(), 'backup.tar.gz');
    await writeFile(file, Buffer.concat(pieces));
    const out = scratch();
    await run('tar', ['-xzf', file, '-C', out]);
    const restored = await openPglite(path.join(out, 'pg'));
    try {
      const rdb = restored.db;
      const rcount = async (table: string) =>
        Number(
          ((await rdb.execute(sql.raw(`select count(*)::int as n from ${table}`))) as { rows: { n: number }[] }).rows[0]
            ?.n,
        );
      expect(await rcount('before_backup')).toBe(4000);
      expect(await rcount('during_backup')).toBe(20000);
      const ending = (await rdb.execute(
        sql`select count(*)::int as n from before_backup where note = 'while ending'`,
      )) as {
        rows: { n: number }[];
      };
      expect(ending.rows[0]?.n).toBe(10);
      // Indexes agree with their tables, and the restored database takes writes.
      await rdb.execute(sql`set enable_seqscan = off`);
      const indexed = (await rdb.execute(
        sql`select count(*)::int as n from during_backup where id between 1 and 20000`,
      )) as {
        rows: { n: number }[];
      };
      expect(indexed.rows[0]?.n).toBe(20000);
      await rdb.execute(sql`insert into during_backup values (30000)`);
      expect(await rcount('during_backup')).toBe(20001);
    } finally {
      await restored.close();
    }
  });
});
