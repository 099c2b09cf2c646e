/**
 * PGlite has no autovacuum, so the server runs its rules (src/db/maintenance.ts). Without it no
 * page of the embedded database was ever all-visible: an index-only scan of the posting index
 * fetched every heap page, and the planner had no statistics.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { setTimeout } from 'node:timers/promises';
import { pino } from 'pino';
import { sql } from '../../src/db/orm.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPglite, queryRows, type Database } from '../../src/db/client.ts';
import { maintenanceFor, startEmbeddedMaintenance, type Maintenance } from '../../src/db/maintenance.ts';
import { runInBackground, sinceInteractiveStatement } from '../../src/db/priority.ts';
import { startTestApp } from '../support/app.ts';
import { until } from '../support/poll.ts';
import { scratchDirs } from '../support/scratch.ts';

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

describe('a table with a vector (HNSW) index', () => {
  /**
   * pgvector repairs its graph around every deleted vector in a vacuum's index cleanup, which held
   * the embedded database for seconds; such a table's vacuum skips its indexes unless the database
   * is idle, and the whole vacuum follows once it is (or after `maxOwedMs`).
   */
  async function vectors(table: string) {
    const db = database.db;
    await db.execute(sql`create extension if not exists vector`);
    await db.execute(sql.raw(`create table ${table} (id int primary key, v vector(8))`));
    await db.execute(sql.raw(`create index ${table}_hnsw on ${table} using hnsw (v vector_cosine_ops)`));
    await db.execute(
      sql.raw(`insert into ${table} select g, array(select random() from generate_series(1, 8))::vector
               from generate_series(1, 3000) g`),
    );
    const visible = async () =>
      (
        await queryRows<{ pages: number; allvisible: number }>(
          db,
          sql`select (pg_relation_size(oid) / 8192)::int as pages, relallvisible as allvisible
              from pg_class where relname = ${table}`,
        )
      )[0] ?? { pages: -1, allvisible: 0 };
    return { visible, remove: () => db.execute(sql.raw(`delete from ${table} where id % 2 = 0`)) };
  }
  /**
   * Maintenance whose passes the test runs, looking for an idle moment every 50 ms; `cleanups`
   * are its log lines of deferred cleanups done.
   */
  function deferring(options: Partial<Parameters<typeof startEmbeddedMaintenance>[0]>) {
    const lines: Record<string, unknown>[] = [];
    const log = pino(
      { level: 'info' },
      { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
    );
    const timed = startEmbeddedMaintenance({
      db: database.db,
      log,
      firstDelayMs: 3_600_000,
      intervalMs: 3_600_000,
      idleCheckMs: 50,
      ...options,
    });
    const cleanups = () => lines.filter((l) => l.msg === 'embedded database: deferred index cleanup done');
    return { timed, cleanups };
  }
  const skippedIndexes = (table: string): unknown =>
    expect.stringMatching(new RegExp(`^vacuum \\(index_cleanup off(, analyze)?\\) "${table}"$`));

  it('is vacuumed without its index cleanup while requests come, and whole once the database is idle', async () => {
    const { visible, remove } = await vectors('vecs_idle');
    let idle = false;
    const { timed, cleanups } = deferring({ idle: () => idle });
    try {
      expect(await timed.runOnce()).toContain('vacuum (index_cleanup off, analyze) "vecs_idle"');
      await remove();
      expect(await timed.runOnce()).toContainEqual(skippedIndexes('vecs_idle'));
      // The dead rows' line pointers stay until the index is cleaned: those pages are not all-visible.
      const owing = await visible();
      expect(owing.allvisible).toBeLessThan(owing.pages);
      await setTimeout(300);
      expect(cleanups()).toEqual([]);

      idle = true;
      const [line] = await until('the deferred cleanup', () => cleanups().length > 0 && cleanups(), {
        timeoutMs: 20_000,
      });
      expect(line).toMatchObject({ table: 'vecs_idle', duration_ms: expect.any(Number), owed_ms: expect.any(Number) });
      const after = await visible();
      expect(after.allvisible).toBe(after.pages);
      // Nothing is owed any more, and the index answers with the remaining rows only.
      await setTimeout(200);
      expect(cleanups()).toHaveLength(1);
      const [count] = await queryRows<{ n: number }>(
        database.db,
        sql`select count(*)::int as n from (select id from vecs_idle order by v <=> '[1,1,1,1,1,1,1,1]' limit 40) t`,
      );
      expect(count?.n).toBe(40);
    } finally {
      await timed.close();
    }
  });

  it('an idle pass vacuums it whole at once', async () => {
    const { visible, remove } = await vectors('vecs_quiet');
    const { timed } = deferring({ idle: () => true });
    try {
      await timed.runOnce();
      await remove();
      const ran = await timed.runOnce();
      expect(ran).toContain('vacuum (analyze) "vecs_quiet"');
      expect(ran.join()).not.toContain('index_cleanup');
      const after = await visible();
      expect(after.allvisible).toBe(after.pages);
    } finally {
      await timed.close();
    }
  });

  it('under traffic that never stops, the cleanup comes after maxOwedMs', async () => {
    const { visible, remove } = await vectors('vecs_busy');
    const { timed, cleanups } = deferring({ maxOwedMs: 1_000, idle: () => false });
    try {
      await timed.runOnce();
      await remove();
      const owedAt = performance.now();
      expect(await timed.runOnce()).toContainEqual(skippedIndexes('vecs_busy'));
      await until('the forced cleanup', () => cleanups().length > 0, { timeoutMs: 20_000 });
      expect(performance.now() - owedAt).toBeGreaterThanOrEqual(900);
      const after = await visible();
      expect(after.allvisible).toBe(after.pages);
    } finally {
      await timed.close();
    }
  });

  it("by default, a request's statements hold the cleanup off until they stop", async () => {
    const { visible, remove } = await vectors('vecs_requests');
    const { timed, cleanups } = deferring({ idleMs: 500, quietMs: 0 });
    const touch = () => database.db.execute(sql`select count(*) from vecs_requests where id < 10`);
    try {
      await touch();
      await timed.runOnce();
      await remove();
      await touch();
      expect(await timed.runOnce()).toContainEqual(skippedIndexes('vecs_requests'));
      // A request's statement every 100 ms for 2 s: never idle for 500 ms.
      const busyUntil = performance.now() + 2_000;
      while (performance.now() < busyUntil) {
        await touch();
        await setTimeout(100);
      }
      expect(cleanups()).toEqual([]);
      await until('the cleanup once requests stopped', () => cleanups().length > 0, { timeoutMs: 20_000 });
      const after = await visible();
      expect(after.allvisible).toBe(after.pages);
    } finally {
      await timed.close();
    }
  });
});

describe('a server left alone', () => {
  it('sends its embedded database nothing a request would: its pollers (jobs, webhooks) are background work, so it can be idle', async () => {
    const own = await openPglite();
    await own.migrate();
    const app = await startTestApp({ database: own });
    try {
      // The webhook sender polls every 500 ms and the ingestion worker every second.
      await setTimeout(2_500);
      expect(sinceInteractiveStatement()).toBeGreaterThan(2_000);
      // A request's statement counts.
      expect((await app.request('/api/v1/rag/collections')).status).toBe(200);
      expect(sinceInteractiveStatement()).toBeLessThan(1_000);
    } finally {
      await app.close();
      await own.close();
    }
  });
});

describe('checkpoints of the embedded database', () => {
  const freshDir = scratchDirs('ragport-checkpoint-');
  /** WAL written since the last checkpoint, and the segment files in pg_wal. */
  const wal = async (db: Database, dir: string) => {
    const [row] = await queryRows<{ bytes: number }>(
      db.db,
      sql`select (pg_current_wal_lsn() - checkpoint_lsn)::float8 as bytes from pg_control_checkpoint()`,
    );
    const segments = readdirSync(path.join(dir, 'pg_wal')).filter((f) => /^[0-9A-F]{24}$/.test(f)).length;
    return { bytes: row?.bytes ?? NaN, segments };
  };
  const write = async (db: Database, rows: number) => {
    await db.db.execute(
      sql`insert into churn (v) select repeat(md5(g::text), 16) from generate_series(1, ${rows}::int) g`,
    );
    await db.db.execute(sql`delete from churn`);
  };
  /** A database in a directory, with passes run by the test and the given checkpoint rules. */
  const withPasses = async (
    rules: { checkpointWalBytes?: number; checkpointIntervalMs?: number },
    body: (own: Database, dir: string, timed: Maintenance) => Promise<void>,
  ) => {
    const dir = freshDir();
    const own = await openPglite(dir);
    await own.db.execute(sql`create table churn (id serial primary key, v text)`);
    const timed = startEmbeddedMaintenance({
      db: own.db,
      log: pino({ level: 'silent' }),
      firstDelayMs: 3_600_000,
      intervalMs: 3_600_000,
      ...rules,
    });
    try {
      // A first pass settles what start-up wrote.
      await timed.runOnce();
      await body(own, dir, timed);
    } finally {
      await timed.close();
      await own.close();
    }
  };

  it(
    'a pass checkpoints once enough WAL was written: pg_wal stops growing with every write (PGlite has no checkpointer)',
    () =>
      withPasses({ checkpointWalBytes: 8 * 1024 * 1024, checkpointIntervalMs: 3_600_000 }, async (own, dir, timed) => {
        const [start] = await queryRows<{ lsn: string }>(own.db, sql`select pg_current_wal_lsn()::text as lsn`);
        let checkpoints = 0;
        for (let i = 0; i < 24; i++) {
          await write(own, 20_000);
          if ((await timed.runOnce()).includes('checkpoint')) checkpoints++;
        }
        const [total] = await queryRows<{ bytes: number }>(
          own.db,
          sql`select pg_wal_lsn_diff(pg_current_wal_lsn(), ${start?.lsn}::pg_lsn)::float8 as bytes`,
        );
        const after = await wal(own, dir);
        // ~190 MB written; pg_wal keeps the segments since the last checkpoint and a few recycled
        // ones (min_wal_size), not every one written.
        expect(total?.bytes).toBeGreaterThan(150 * 1024 * 1024);
        expect(checkpoints).toBeGreaterThan(8);
        expect(after.bytes).toBeLessThan(16 * 1024 * 1024);
        expect(after.segments * 16 * 1024 * 1024).toBeLessThan((total?.bytes ?? 0) / 2);

        // Nothing written since a checkpoint: none.
        if (after.bytes > 1_024) expect(await timed.runOnce()).toContain('checkpoint');
        expect(await timed.runOnce()).not.toContain('checkpoint');
        // Under the size: none either.
        await write(own, 1_000);
        expect(await timed.runOnce()).not.toContain('checkpoint');
      }),
    120_000,
  );

  it(
    '…and once the last one is old with anything written since',
    () =>
      withPasses({ checkpointIntervalMs: 0 }, async (own, dir, timed) => {
        await write(own, 100);
        expect((await wal(own, dir)).bytes).toBeGreaterThan(1_024);
        expect(await timed.runOnce()).toContain('checkpoint');
        expect((await wal(own, dir)).bytes).toBeLessThan(1_024);
        expect(await timed.runOnce()).not.toContain('checkpoint');
      }),
    120_000,
  );
});
