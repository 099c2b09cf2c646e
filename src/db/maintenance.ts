import type { Logger } from 'pino';
import { sql } from './orm.ts';
import { queryRows, type Db } from './client.ts';
import { runInBackground, sinceBackgroundStatement } from './priority.ts';

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
}

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
}): Maintenance {
  const { db, log } = options;
  const quietMs = options.quietMs ?? 2_000;
  const maxDeferMs = options.maxDeferMs ?? 300_000;
  let firstPass = true;
  let lastPass = performance.now();
  let running: Promise<string[]> | undefined;
  let closed = false;

  const pass = async (): Promise<string[]> => {
    // The session flushes its counters at most once a second; this makes the next read current.
    await db.execute(sql`select pg_stat_force_next_flush()`);
    const tables = await queryRows<TableState>(
      db,
      sql`select c.relname as name, c.reltuples::float8 as reltuples, c.relallvisible as "allVisible",
                 (pg_relation_size(c.oid) / current_setting('block_size')::int)::int as pages,
                 s.n_dead_tup::int as dead, s.n_ins_since_vacuum::int as "insertedSinceVacuum",
                 s.n_mod_since_analyze::int as "modifiedSinceAnalyze", c.reloptions as options
          from pg_stat_user_tables s join pg_class c on c.oid = s.relid
          where s.schemaname = 'public'`,
    );
    const ran: string[] = [];
    for (const table of tables) {
      if (closed) break;
      const action = maintenanceFor(table, firstPass);
      if (action === null) continue;
      const statement = `${action} "${table.name.replaceAll('"', '""')}"`;
      const started = performance.now();
      await db.execute(sql.raw(statement));
      ran.push(statement);
      log.debug({ statement, ms: Math.round(performance.now() - started) }, 'embedded database maintenance');
    }
    firstPass = false;
    lastPass = performance.now();
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
  first.unref();
  timer.unref();

  return {
    runOnce,
    async close() {
      closed = true;
      clearTimeout(first);
      clearInterval(timer);
      await running?.catch(() => undefined);
    },
  };
}
