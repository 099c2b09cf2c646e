/**
 * PGlite has no autovacuum, so the server runs its rules (src/db/maintenance.ts). Without it no
 * page of the embedded database was ever all-visible: an index-only scan of the posting index
 * fetched every heap page, and the planner had no statistics.
 */
import { setTimeout } from 'node:timers/promises';
import { pino } from 'pino';
import { sql } from '../../src/db/orm.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPglite, queryRows, type Database } from '../../src/db/client.ts';
import { maintenanceFor, startEmbeddedMaintenance, type Maintenance } from '../../src/db/maintenance.ts';
import { runInBackground } from '../../src/db/priority.ts';
import { until } from '../support/poll.ts';

let database: Database;
let maintenance: Maintenance;

beforeAll(async () => {
  database = await openPglite();
  await database.db.execute(sql`create table postings (term text, chunk_id int, tf int, primary key (term, chunk_id))`);
  await database.db.execute(sql`create index postings_chunk on postings (chunk_id) include (term, tf)`);
  // Timers far off: each pass is run by the test.
  maintenance = startEmbeddedMaintenance({
    db: database.db,
    log: pino({ level: 'silent' }),
    firstDelayMs: 3_600_000,
    intervalMs: 3_600_000,
  });
});
afterAll(async () => {
  await maintenance.close();
  await database.close();
});

const plan = async (query: string) =>
  (await queryRows<{ 'QUERY PLAN': string }>(database.db, sql.raw(`explain (analyze, costs off) ${query}`)))
    .map((r) => r['QUERY PLAN'])
    .join('\n');

const state = async () =>
  (
    await queryRows<{ pages: number; allvisible: number; reltuples: number }>(
      database.db,
      sql`select (pg_relation_size(oid) / 8192)::int as pages, relallvisible as allvisible, reltuples::float8 as reltuples
          from pg_class where relname = 'postings'`,
    )
  )[0];

describe('maintenance of the embedded database', () => {
  it('vacuums and analyzes a table after a bulk insert: index-only scans stop fetching heap pages', async () => {
    await database.db.execute(
      sql`insert into postings select 't' || (g % 500), g, 1 + g % 3 from generate_series(1, 20000) g`,
    );
    expect((await state())?.allvisible).toBe(0);
    const before = await plan('select term, tf from postings where chunk_id between 100 and 400');
    expect(before).toMatch(/Heap Fetches: [1-9]|Bitmap Heap Scan|Seq Scan/);

    const ran = await maintenance.runOnce();
    expect(ran).toContain('vacuum (analyze) "postings"');
    const after = await state();
    expect(after?.allvisible).toBe(after?.pages);
    expect(after?.reltuples).toBe(20_000);
    expect(await plan('select term, tf from postings where chunk_id between 100 and 400')).toMatch(
      /Index Only Scan using postings_chunk[\s\S]*Heap Fetches: 0/,
    );
  });

  it('leaves an unchanged table alone; analyzes after changes, vacuums after enough dead rows', async () => {
    expect(await maintenance.runOnce()).not.toEqual(expect.arrayContaining([expect.stringContaining('"postings"')]));
    // 3,000 changed rows of 20,000: over analyze's 50 + 10 %, under vacuum's 50 + 20 % (4,050).
    await database.db.execute(sql`delete from postings where chunk_id <= 3000`);
    expect(await maintenance.runOnce()).toEqual(expect.arrayContaining(['analyze "postings"']));
    expect((await state())?.reltuples).toBe(17_000);
    // 4,500 dead rows: over 50 + 20 % of the 17,000 rows the analyze counted.
    await database.db.execute(sql`delete from postings where chunk_id <= 4500`);
    expect(await maintenance.runOnce()).toEqual(expect.arrayContaining(['vacuum "postings"']));
    const after = await state();
    expect(after?.allvisible).toBe(after?.pages);
  });
});

describe("a table's own autovacuum settings", () => {
  it('are read from the catalog: 150 inserted rows vacuum a table set to 100, not the default 1,000', async () => {
    await database.db.execute(
      sql`create table settled (id int primary key)
          with (autovacuum_vacuum_insert_threshold = 100, autovacuum_vacuum_insert_scale_factor = 0)`,
    );
    await database.db.execute(sql`create table unsettled (id int primary key)`);
    await maintenance.runOnce();
    await database.db.execute(sql`insert into settled select g from generate_series(1, 150) g`);
    await database.db.execute(sql`insert into unsettled select g from generate_series(1, 150) g`);
    const ran = await maintenance.runOnce();
    expect(ran.some((s) => s.startsWith('vacuum') && s.endsWith('"settled"'))).toBe(true);
    expect(ran.some((s) => s.startsWith('vacuum') && s.endsWith('"unsettled"'))).toBe(false);
  });

  it('the postings table has them once migrated (migration 0014)', async () => {
    const migrated = await openPglite();
    try {
      await migrated.migrate();
      const [row] = await queryRows<{ options: string[] }>(
        migrated.db,
        sql`select reloptions as options from pg_class where relname = 'chunk_terms'`,
      );
      expect(row?.options).toEqual(
        expect.arrayContaining([
          'autovacuum_vacuum_insert_threshold=100000',
          'autovacuum_vacuum_insert_scale_factor=0',
          'autovacuum_vacuum_scale_factor=0.02',
        ]),
      );
    } finally {
      await migrated.close();
    }
  });
});

describe('passes on a timer', () => {
  /**
   * A table of 5,000 rows never vacuumed, and maintenance on a quick timer (quiet means no
   * background statement for 400 ms); `visible` is its all-visible page count.
   */
  async function timedOn(table: string) {
    const db = database.db;
    await db.execute(sql.raw(`create table ${table} (id int)`));
    await db.execute(sql.raw(`insert into ${table} select generate_series(1, 5000)`));
    const visible = async () =>
      (await queryRows<{ n: number }>(db, sql`select relallvisible as n from pg_class where relname = ${table}`))[0]
        ?.n ?? 0;
    const timed = startEmbeddedMaintenance({
      db,
      log: pino({ level: 'silent' }),
      firstDelayMs: 50,
      intervalMs: 100,
      quietMs: 400,
      maxDeferMs: 60_000,
    });
    const touch = () => db.execute(sql.raw(`select count(*) from ${table} where id < 10`));
    return { visible, timed, touch };
  }

  it('wait while background work (ingestion) is writing, then run', async () => {
    const { visible, timed, touch } = await timedOn('busy');
    try {
      // Background statements every 50 ms for 1.5 s: no pass may start meanwhile.
      const busyUntil = performance.now() + 1_500;
      while (performance.now() < busyUntil) {
        await runInBackground(touch);
        await setTimeout(50);
      }
      expect(await visible()).toBe(0);
      // Quiet: the next pass vacuums it.
      await until('a vacuum of busy', async () => (await visible()) > 0, { timeoutMs: 5_000 });
    } finally {
      await timed.close();
    }
  });

  it("an idle worker's polls for jobs are not writing: they do not hold a pass off", async () => {
    const { visible, timed, touch } = await timedOn('polled');
    try {
      // Polls every 50 ms, as the ingestion worker's claims (every second) when no job waits.
      let vacuumed = false;
      const deadline = performance.now() + 3_000;
      while (!vacuumed && performance.now() < deadline) {
        await runInBackground(touch, 'polling');
        vacuumed = (await visible()) > 0;
        await setTimeout(50);
      }
      expect(vacuumed).toBe(true);
    } finally {
      await timed.close();
    }
  });
});

describe('autovacuum rules', () => {
  const table = {
    name: 't',
    reltuples: 10_000,
    pages: 100,
    allVisible: 100,
    dead: 0,
    insertedSinceVacuum: 0,
    modifiedSinceAnalyze: 0,
  };
  it('follows the default thresholds', () => {
    expect(maintenanceFor(table, false)).toBeNull();
    expect(maintenanceFor({ ...table, dead: 2_050 }, false)).toBeNull();
    expect(maintenanceFor({ ...table, dead: 2_051 }, false)).toBe('vacuum');
    expect(maintenanceFor({ ...table, insertedSinceVacuum: 3_001, modifiedSinceAnalyze: 3_001 }, false)).toBe(
      'vacuum (analyze)',
    );
    expect(maintenanceFor({ ...table, modifiedSinceAnalyze: 1_051 }, false)).toBe('analyze');
  });
  it('on the first pass, takes what an earlier process left: pages not all-visible, statistics of unknown age', () => {
    expect(maintenanceFor({ ...table, allVisible: 90 }, true)).toBe('vacuum (analyze)');
    expect(maintenanceFor({ ...table, allVisible: 90 }, false)).toBeNull();
    // Its changes since the last analyze are unknown: the statistics may be far off.
    expect(maintenanceFor(table, true)).toBe('analyze');
    expect(maintenanceFor({ ...table, reltuples: -1 }, true)).toBe('analyze');
    expect(maintenanceFor({ ...table, reltuples: -1, pages: 0, allVisible: 0 }, true)).toBeNull();
  });
  it("follows a table's own autovacuum settings, as autovacuum does", () => {
    // The postings table's (migration 0014): every 100,000 inserted rows, 2 % dead rows.
    const postings = {
      ...table,
      reltuples: 40_000_000,
      options: [
        'autovacuum_vacuum_insert_threshold=100000',
        'autovacuum_vacuum_insert_scale_factor=0',
        'autovacuum_vacuum_scale_factor=0.02',
      ],
    };
    expect(maintenanceFor({ ...postings, insertedSinceVacuum: 100_000 }, false)).toBeNull();
    expect(maintenanceFor({ ...postings, insertedSinceVacuum: 100_001 }, false)).toBe('vacuum');
    // The default would wait for 8,001,000 inserted rows here.
    expect(maintenanceFor({ ...postings, options: null, insertedSinceVacuum: 8_000_000 }, false)).toBeNull();
    expect(maintenanceFor({ ...postings, dead: 800_051 }, false)).toBe('vacuum');
    expect(maintenanceFor({ ...postings, dead: 800_049 }, false)).toBeNull();
    // Settings not given keep their defaults (analyze at 50 + 10 %).
    expect(maintenanceFor({ ...postings, modifiedSinceAnalyze: 4_000_051 }, false)).toBe('analyze');
    expect(maintenanceFor({ ...table, options: ['autovacuum_enabled=false'], dead: 9_999 }, false)).toBeNull();
  });
});
