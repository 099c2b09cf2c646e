import type { Logger } from 'pino';
import { sql } from './orm.ts';
import { queryRows, type Db } from './client.ts';
import { runInBackground, sinceBackgroundStatement, sinceInteractiveStatement } from './priority.ts';

/**
 * Autovacuum for the embedded database. PGlite runs PostgreSQL as a single backend, without the
 * autovacuum launcher, so nothing ever vacuumed or analyzed its tables: no page was marked
 * all-visible, so the covering posting indexes could not answer by index-only scans (at 11,450
 * SciFact chunks the BM25 leg read 5,661 heap pages for 6,472 postings, p99 37.8 ms; 14.4 ms after
 * VACUUM and ANALYZE), and the planner planned every search without statistics.
 *
 * This applies autovacuum's default rules to the counters PostgreSQL keeps for the session:
 * vacuum a table when its dead rows exceed 50 + 20 % of its rows or its rows inserted since the
 * last vacuum exceed 1,000 + 20 %, analyze it when its rows changed since the last analyze exceed
 * 50 + 10 %, or by the table's own settings where it has them (`alter table … set
 * (autovacuum_vacuum_insert_threshold = …)`, as the postings table does: migration 0014), as
 * autovacuum would. The counters start at zero with each process, so the first pass also vacuums
 * every table that has pages not known to be all-visible and analyzes every table that has pages
 * (~0.4 s in all at 12,000 SciFact chunks). Each table is one statement, run as background work:
 * searches and other requests go first; and a pass waits while ingestion is writing (a few
 * minutes at most; an idle worker asking for jobs is not writing), since the database runs
 * nothing else while a vacuum or analyze runs.
 *
 * A vacuum of a table with a vector (HNSW) index, or with large indexes, is split in two. pgvector
 * repairs the graph around every deleted vector during a vacuum's index cleanup, and on the
 * embedded database that held it for seconds: 1.7 s after 20 chunks of a 3,156-chunk collection
 * were deleted, 5.7 s after 155, 6.9 s after half of them, 3.4 s after a 3,106-chunk document was
 * replaced (the heap alone: 5–20 ms). So while requests come, such a vacuum skips the indexes
 * (`index_cleanup off`: the dead rows' space is freed, their index entries stay and searches pass
 * them by, and their pages are not all-visible until then) and the table is owed a whole vacuum,
 * run when the database is idle: no request's statement for `idleMs`, no background work for
 * `quietMs`; or, under traffic that never stops, once it has been owed for `maxOwedMs`.
 */
export interface Maintenance {
  /** One pass now (what the timer runs); resolves to the statements it ran. */
  runOnce(): Promise<string[]>;
  close(): Promise<void>;
}

interface TableState {
  name: string;
  /** Rows as of the last vacuum or analyze; -1 when never analyzed. */
  reltuples: number;
  pages: number;
  allVisible: number;
  dead: number;
  insertedSinceVacuum: number;
  modifiedSinceAnalyze: number;
  /** The table's storage parameters (`pg_class.reloptions`), e.g. `autovacuum_vacuum_threshold=50`. */
  options?: string[] | null;
  /** Whether its indexes take long to clean up: a vector (HNSW) index, or many pages (see above). */
  slowIndexes?: boolean;
}

/**
 * Indexes of more pages than this in all, a table's vacuum defers their cleanup like a vector
 * index's: a B-tree's cleanup reads all of it (the postings' 7,368 pages after a 3,106-chunk
 * replace: 640 ms), so ~100 ms at most is spent on one while requests come.
 */
const LARGE_INDEX_PAGES = 1_000;

/** Autovacuum's defaults, which a table's storage parameters override one by one. */
const DEFAULTS = {
  autovacuum_vacuum_threshold: 50,
  autovacuum_vacuum_scale_factor: 0.2,
  autovacuum_vacuum_insert_threshold: 1_000,
  autovacuum_vacuum_insert_scale_factor: 0.2,
  autovacuum_analyze_threshold: 50,
  autovacuum_analyze_scale_factor: 0.1,
};

function settingsOf(options: string[] | null | undefined): typeof DEFAULTS & { enabled: boolean } {
  const settings = { ...DEFAULTS, enabled: true };
  for (const option of options ?? []) {
    const at = option.indexOf('=');
    const [key, value] = [option.slice(0, at), option.slice(at + 1)];
    if (key === 'autovacuum_enabled') settings.enabled = !['false', 'off', 'no', '0'].includes(value.toLowerCase());
    else if (key in DEFAULTS && Number.isFinite(Number(value))) settings[key as keyof typeof DEFAULTS] = Number(value);
  }
  return settings;
}

/** What a pass does to one table: its statement, or nothing. */
export function maintenanceFor(t: TableState, firstPass: boolean): 'vacuum (analyze)' | 'vacuum' | 'analyze' | null {
  const rows = Math.max(t.reltuples, 0);
  const set = settingsOf(t.options);
  // A table with autovacuum turned off is left alone, as autovacuum would leave it.
  if (!set.enabled) return null;
  let vacuum =
    t.dead > set.autovacuum_vacuum_threshold + set.autovacuum_vacuum_scale_factor * rows ||
    t.insertedSinceVacuum > set.autovacuum_vacuum_insert_threshold + set.autovacuum_vacuum_insert_scale_factor * rows;
  let analyze = t.modifiedSinceAnalyze > set.autovacuum_analyze_threshold + set.autovacuum_analyze_scale_factor * rows;
  if (firstPass && t.pages > 0) {
    vacuum ||= t.allVisible < t.pages;
    // What an earlier process changed since its last analyze is unknown (the counters start at
    // zero): statistics taken halfway through an ingestion that finished just before a restart
    // stayed until a tenth more rows changed, and the planner, expecting a third of a collection's
    // 12,000 chunks, scanned them all instead of its vector index (a search 34 ms instead of 12).
    analyze = true;
  }
  return vacuum && analyze ? 'vacuum (analyze)' : vacuum ? 'vacuum' : analyze ? 'analyze' : null;
}

/** WAL after a checkpoint with nothing written since: its own record (120 bytes measured). */
const CHECKPOINT_RECORD_BYTES = 1_024;

export function startEmbeddedMaintenance(options: {
  db: Db;
  log: Logger;
  /** Between passes; autovacuum's default naptime is 60 s. */
  intervalMs?: number;
  /** Before the first pass, so that start-up is not slowed. */
  firstDelayMs?: number;
  /**
   * A pass waits while other background work (ingestion) sent a statement within this time: a
   * vacuum or an analyze holds the embedded database for up to a few hundred milliseconds, and
   * searches during ingestion already wait for its commits. At most `maxDeferMs` between passes.
   */
  quietMs?: number;
  maxDeferMs?: number;
  /** Idle: no statement of a request's for this long (and background work quiet, as above). */
  idleMs?: number;
  /** A table owed its index cleanup gets it after this long even if the database is never idle. */
  maxOwedMs?: number;
  /** How often an owed cleanup looks for an idle moment. */
  idleCheckMs?: number;
  /** Whether the database is idle now (tests); by default from the statements' times (priority.ts). */
  idle?: () => boolean;
  /** A checkpoint once this much WAL was written since the last one (see `checkpointDue`). */
  checkpointWalBytes?: number;
  /** …or once the last one is this old and anything was written since. */
  checkpointIntervalMs?: number;
}): Maintenance {
  const { db, log } = options;
  const quietMs = options.quietMs ?? 2_000;
  const maxDeferMs = options.maxDeferMs ?? 300_000;
  const idleMs = options.idleMs ?? 5_000;
  const maxOwedMs = options.maxOwedMs ?? 30 * 60_000;
  const checkpointWalBytes = options.checkpointWalBytes ?? 64 * 1024 * 1024;
  const checkpointIntervalMs = options.checkpointIntervalMs ?? 300_000;
  const idle = options.idle ?? (() => sinceInteractiveStatement() >= idleMs && sinceBackgroundStatement() >= quietMs);
  let firstPass = true;
  let lastPass = performance.now();
  let running: Promise<string[]> | undefined;
  let closed = false;
  /** Tables vacuumed without their index cleanup, and since when. */
  const owed = new Map<string, number>();
  const quoted = (table: string) => `"${table.replaceAll('"', '""')}"`;

  /** Runs one maintenance statement, logged with its time. */
  const run = async (statement: string): Promise<void> => {
    const started = performance.now();
    await db.execute(sql.raw(statement));
    log.debug({ statement, ms: Math.round(performance.now() - started) }, 'embedded database maintenance');
  };

  const pass = async (): Promise<string[]> => {
    // Decided before this pass's own statements, which are background work.
    const idleNow = idle();
    // The session flushes its counters at most once a second; this makes the next read current.
    await db.execute(sql`select pg_stat_force_next_flush()`);
    const tables = await queryRows<TableState>(
      db,
      sql`select c.relname as name, c.reltuples::float8 as reltuples, c.relallvisible as "allVisible",
                 (pg_relation_size(c.oid) / current_setting('block_size')::int)::int as pages,
                 s.n_dead_tup::int as dead, s.n_ins_since_vacuum::int as "insertedSinceVacuum",
                 s.n_mod_since_analyze::int as "modifiedSinceAnalyze", c.reloptions as options,
                 (exists (select 1 from pg_index i join pg_class ic on ic.oid = i.indexrelid
                            join pg_am am on am.oid = ic.relam
                          where i.indrelid = c.oid and am.amname = 'hnsw')
                  or (select coalesce(sum(pg_relation_size(i.indexrelid)), 0) from pg_index i where i.indrelid = c.oid)
                     / current_setting('block_size')::int > ${LARGE_INDEX_PAGES}) as "slowIndexes"
          from pg_stat_user_tables s join pg_class c on c.oid = s.relid
          where s.schemaname = 'public'`,
    );
    const ran: string[] = [];
    // Owed cleanups first when idle: a whole vacuum now also does what this pass would.
    if (idleNow) ran.push(...(await cleanUp()));
    for (const table of tables) {
      if (closed) break;
      let action = maintenanceFor(table, firstPass);
      // Just vacuumed whole by the cleanup above: only the analyze is left.
      if (action !== 'analyze' && ran.includes(`vacuum ${quoted(table.name)}`))
        action = action === 'vacuum (analyze)' ? 'analyze' : null;
      if (action === null) continue;
      let statement = `${action} ${quoted(table.name)}`;
      if (action !== 'analyze' && table.slowIndexes && !idleNow) {
        statement = `vacuum (index_cleanup off${action === 'vacuum' ? '' : ', analyze'}) ${quoted(table.name)}`;
        // Rows only inserted leave nothing to clean up (a whole vacuum would skip the indexes too).
        if ((table.dead > 0 || firstPass) && !owed.has(table.name)) owed.set(table.name, performance.now());
      }
      await run(statement);
      ran.push(statement);
    }
    if (!closed && (await checkpointDue())) {
      await run('checkpoint');
      ran.push('checkpoint');
    }
    firstPass = false;
    lastPass = performance.now();
    return ran;
  };

  /**
   * PGlite has no checkpointer either, and a full WAL does not start a checkpoint in its single
   * backend: without one, `DATA_DIR/pg/pg_wal` grew by every byte written for as long as the server
   * ran (~300 MB an hour under a mixed load), and a restart after a crash replayed all of it. So a
   * pass checkpoints as PostgreSQL's defaults would, sooner by size: `checkpointWalBytes` (64 MB)
   * written, or the last checkpoint `checkpointIntervalMs` (5 min, `checkpoint_timeout`) old with
   * something written since. A checkpoint writes the dirty part of 32 MB of buffers: 11–18 ms after
   * 17–50 MB of WAL, 1.5 ms with nothing to write; the segments before it are removed.
   */
  const checkpointDue = async (): Promise<boolean> => {
    const [wal] = await queryRows<{ bytes: number; age_ms: number }>(
      db,
      sql`select (pg_current_wal_lsn() - checkpoint_lsn)::float8 as bytes,
                 extract(epoch from now() - checkpoint_time)::float8 * 1000 as age_ms
          from pg_control_checkpoint()`,
    );
    if (wal === undefined) return false;
    // The checkpoint record itself is what follows the last checkpoint when nothing was written.
    const written = wal.bytes > CHECKPOINT_RECORD_BYTES;
    return wal.bytes >= checkpointWalBytes || (written && wal.age_ms >= checkpointIntervalMs);
  };

  /** The whole vacuum of each table owed one (see above). */
  const cleanUp = async (): Promise<string[]> => {
    const ran: string[] = [];
    for (const [table, since] of [...owed]) {
      if (closed) break;
      const statement = `vacuum ${quoted(table)}`;
      const started = performance.now();
      try {
        await run(statement);
      } catch (error) {
        // Dropped meanwhile: nothing is owed any more.
        if ((error as { code?: string }).code !== '42P01') throw error;
      }
      owed.delete(table);
      ran.push(statement);
      log.info(
        { table, owed_ms: Math.round(started - since), duration_ms: Math.round(performance.now() - started) },
        'embedded database: deferred index cleanup done',
      );
    }
    return ran;
  };

  const runOnce = (): Promise<string[]> => {
    // One pass at a time; a caller during a pass gets that pass.
    running ??= runInBackground(pass).finally(() => {
      running = undefined;
    });
    return running;
  };

  const tick = () => {
    if (sinceBackgroundStatement() < quietMs && performance.now() - lastPass < maxDeferMs) return;
    runOnce().catch((error: unknown) => {
      if (!closed) log.warn({ err: error }, 'embedded database maintenance failed; retried at the next pass');
    });
  };
  const first = setTimeout(tick, options.firstDelayMs ?? 5_000);
  const timer = setInterval(tick, options.intervalMs ?? 30_000);
  // Looks for an idle moment while a cleanup is owed: cheap (no statement), and idle moments between
  // two requests may be shorter than the passes' interval.
  const idleTimer = setInterval(() => {
    if (owed.size === 0 || running !== undefined || closed) return;
    const oldest = Math.min(...owed.values());
    if (!idle() && performance.now() - oldest < maxOwedMs) return;
    running = runInBackground(cleanUp).finally(() => {
      running = undefined;
    });
    running.catch((error: unknown) => {
      if (!closed) log.warn({ err: error }, 'embedded database index cleanup failed; retried when idle');
    });
  }, options.idleCheckMs ?? 1_000);
  first.unref();
  timer.unref();
  idleTimer.unref();

  return {
    runOnce,
    async close() {
      closed = true;
      clearTimeout(first);
      clearInterval(timer);
      clearInterval(idleTimer);
      await running?.catch(() => undefined);
    },
  };
}
