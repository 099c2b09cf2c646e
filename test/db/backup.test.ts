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

/** An embedded database of its own on disk, migrated, `setup` run on it; a backup begun. */
async function backedUp(...setup: ReturnType<typeof sql>[]) {
  const database = await openPglite(path.join(scratch(), 'pg'));
  await database.migrate();
  for (const statement of setup) await database.db.execute(statement);
  const backup = await database.beginBackup?.();
  if (!backup) throw new Error('a data directory of its own: beginBackup expected');
  return { database, db: database.db, backup };
}

/** The archive's pieces extracted as docs/operations.md says, opened. */
async function restore(pieces: Buffer[]) {
  const file = path.join(scratch(), 'backup.tar.gz');
  await writeFile(file, Buffer.concat(pieces));
  const out = scratch();
  await run('tar', ['-xzf', file, '-C', out]);
  return openPglite(path.join(out, 'pg'));
}

describe('online backup of the embedded database', { timeout: 120_000 }, () => {
  it('restores to a consistent state that has what was written while it was read', async () => {
    const { database, db, backup } = await backedUp(
      sql`create table before_backup (id int primary key, note text)`,
      sql`insert into before_backup select g, repeat('b', 100) from generate_series(1, 5000) g`,
    );
    expect(backup.heldMs).toBeGreaterThan(0);
    let ended = false;
    const archive = archiveDataDir(backup.dataDir, async () => {
      // After the data files, before backup mode ends: in the log the archive takes next.
      await db.execute(sql`update before_backup set note = 'while ending' where id <= 10`);
      const label = await backup.stop();
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
    // Stopping twice is stopping once; ending (the service ends it when a download finishes) too.
    await expect(backup.stop()).resolves.toContain('START WAL LOCATION');
    await backup.end();
    await backup.end();
    // After the download: not in it.
    await db.execute(sql`insert into during_backup values (20001)`);
    await database.close();

    const restored = await restore(pieces);
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

  it('keeps the log it needs until the archive holds it, however slowly the log is read', async () => {
    const { database, db, backup } = await backedUp(sql`create table kept (id int primary key, note text)`);
    let stopped = false;
    const archive = archiveDataDir(backup.dataDir, async () => {
      // Written after the data files were read: only the log brings it back.
      await db.execute(sql`insert into kept select g, 'before the end' from generate_series(1, 1000) g`);
      const label = await backup.stop();
      stopped = true;
      return label;
    });
    const pieces: Buffer[] = [];
    let churned = false;
    for await (const piece of archive) {
      pieces.push(piece as Buffer);
      if (!stopped || churned) continue;
      // Backup mode has ended; the log is yet to be read. Writes and checkpoints meanwhile recycle
      // every segment no one holds.
      for (let round = 0; round < 6; round++) {
        await db.execute(sql`create table churn (note text)`);
        await db.execute(sql`insert into churn select repeat(md5(g::text), 30) from generate_series(1, 20000) g`);
        await db.execute(sql`drop table churn`);
        await db.execute(sql`checkpoint`);
      }
      churned = true;
    }
    expect(churned).toBe(true);
    await backup.end();
    await database.close();

    const restored = await restore(pieces);
    try {
      const rows = (await restored.db.execute(sql`select count(*)::int as n from kept`)) as { rows: { n: number }[] };
      expect(rows.rows[0]?.n).toBe(1000);
    } finally {
      await restored.close();
    }
  });
});
