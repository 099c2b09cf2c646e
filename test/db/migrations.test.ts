import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { migrationsFolder, openPglite, queryRows, type Db } from '../../src/db/client.ts';
import {
  DatabaseFromNewerReleaseError,
  knownMigrations,
  migrateKnown,
  migrationsLine,
} from '../../src/db/migrations.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';
import { spawnRagport } from '../support/processes.ts';
import { scratchDirs } from '../support/scratch.ts';

/**
 * An older release started on a database a newer one upgraded is refused before it writes
 * anything: drizzle alone applies what it lacks and ignores what it does not know, so an old
 * release ran on upgraded data, and what it wrote could be lost at the next upgrade.
 */
const known = knownMigrations(migrationsFolder);
const last = known.at(-1)!;
const freshDir = scratchDirs('ragport-migrations-');

const recorded = async (db: Db) =>
  (await queryRows<{ n: number }>(db, sql`select count(*)::int as n from drizzle.__drizzle_migrations`))[0]?.n;

/** What a newer release leaves: a migration recorded after this release's last. */
const upgradeByNewerRelease = (db: Db) =>
  db.execute(
    sql`insert into drizzle.__drizzle_migrations (hash, created_at) values ('from-a-newer-release', ${last.when + 60_000})`,
  );

describe('migrations', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase();
  });
  afterAll(async () => {
    await t.close();
  });

  it('a database already migrated: nothing applied, up to date', async () => {
    expect(await t.database.migrate()).toEqual([]);
    expect(await recorded(t.database.db)).toBe(known.length);
  });

  it('a database a newer release upgraded is refused, before anything is written', async () => {
    await upgradeByNewerRelease(t.database.db);
    const before = await recorded(t.database.db);
    const refused = t.database.migrate();
    await expect(refused).rejects.toThrow(DatabaseFromNewerReleaseError);
    await expect(refused).rejects.toThrow(
      `the database was upgraded by a newer ragport release: it holds 1 migration(s) this release does not know`,
    );
    await expect(refused).rejects.toThrow(`this release's last is ${last.tag}`);
    expect(await recorded(t.database.db)).toBe(before);
    // Back on the release that knows it (here: the row gone), it opens again.
    await t.database.db.execute(sql`delete from drizzle.__drizzle_migrations where hash = 'from-a-newer-release'`);
    expect(await t.database.migrate()).toEqual([]);
  });

  it('reports the migrations a run applied, oldest first, and says so in one line', async () => {
    const times = known.map((m) => m.when);
    let state = times.slice(0, -2);
    const applied = await migrateKnown(
      known,
      async () => state,
      async () => {
        state = times;
      },
    );
    expect(applied).toEqual(known.slice(-2).map((m) => m.tag));
    expect(migrationsLine(applied, known)).toBe(
      `database schema: upgraded, 2 migration(s) applied: ${applied.join(', ')}`,
    );
    expect(
      migrationsLine(
        known.map((m) => m.tag),
        known,
      ),
    ).toBe(`database schema: created (${known.length} migrations, the last ${last.tag})`);
    expect(migrationsLine([], known)).toBe(`database schema: up to date (${last.tag})`);
    // A database that never saw a migration gets all of them.
    let fresh: number[] = [];
    expect(
      await migrateKnown(
        known,
        async () => fresh,
        async () => {
          fresh = times;
        },
      ),
    ).toEqual(known.map((m) => m.tag));
  });

  it('`npm start` on a data directory a newer release upgraded: one clear sentence, status 1', async () => {
    const dataDir = freshDir();
    const db = await openPglite(path.join(dataDir, 'pg'));
    await db.migrate();
    await upgradeByNewerRelease(db.db);
    await db.close();

    const server = spawnRagport('server', { DATA_DIR: dataDir, PORT: '0' });
    expect((await server.exited).code).toBe(1);
    expect(server.output()).toContain(
      'ragport failed to start: the database was upgraded by a newer ragport release: it holds 1 migration(s)',
    );
    expect(server.output()).toContain(
      'start the release that upgraded it, or restore a backup taken before the upgrade.',
    );
    // One sentence, not a stack.
    expect(server.output()).not.toMatch(/\n\s+at /);
  }, 120_000);
});
