import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SQL } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { lockDataDir } from './data-dir-lock.ts';
import { listen } from './notifications.ts';
import { sql } from './orm.ts';
import { drizzleNodePg, drizzlePglite, migrateNodePg, migratePglite } from './orm-drivers.ts';
import { knownMigrations, migrateKnown, recordedMigrations } from './migrations.ts';
import { givesSpaceBack, mayWrite, openShortage, parameterBytes, watchDisk } from './disk-guard.ts';
import { startPgliteThread, type RemoteQueryable, type WaitListener } from './pglite-remote.ts';
import * as schema from './schema/index.ts';

export type Schema = typeof schema;
/** A database handle or a transaction: repositories accept either. */
export type Db = PgDatabase<PgQueryResultHKT, Schema>;

export interface Database {
  readonly kind: 'pglite' | 'postgres';
  readonly db: Db;
  /**
   * Applies the migrations the database lacks and returns their tags, oldest first; refuses
   * (DatabaseFromNewerReleaseError) a database a newer release upgraded.
   */
  migrate(): Promise<string[]>;
  /** Reads a real table: true readiness, not a connected socket. */
  ping(): Promise<void>;
  /**
   * LISTEN on `channel`: in process on PGlite, on a connection of its own on the server
   * (reconnected after a failure). `onGap` runs whenever messages may have been missed — and
   * once the server connection is up — so a listener re-reads what it waits for.
   */
  listen(channel: string, onMessage: (payload: string) => void, onGap: () => void): Promise<Subscription>;
  /**
   * The embedded database only (one session, statements and transactions in turn): calls
   * `listener` with how long each waited for that session before it ran, until the returned
   * function is called.
   */
  onWait?(listener: WaitListener): () => void;
  /**
   * The embedded database with a data directory only: puts it in backup mode (PostgreSQL's
   * `pg_backup_start`, a checkpoint; a replication slot keeps the write-ahead log meanwhile) and
   * answers its directory, whose files may then be read while it runs; `stop` leaves backup mode
   * and answers the backup label, to be stored with the files and the log written meanwhile;
   * `end`, once the archive holds that log, lets it go. `heldMs`: how long `pg_backup_start` took
   * (its turn for the session, then its checkpoint, while other statements wait).
   */
  beginBackup?(): Promise<OnlineBackup>;
  close(): Promise<void>;
}

export interface OnlineBackup {
  dataDir: string;
  heldMs: number;
  /** Leaves backup mode (once) and answers the backup label. */
  stop: () => Promise<string>;
  /**
   * Leaves backup mode if not yet, then gives up the write-ahead log kept for the backup (once):
   * only after the archive holds the log, which a checkpoint would otherwise recycle meanwhile.
   */
  end: () => Promise<void>;
}

export interface Subscription {
  close(): Promise<void>;
}

/**
 * What `ping` runs: a read of a real table through its index, not a constant. `select 1` stayed
 * true while a broken embedded database refused every key (issue 13).
 */
const readinessQuery = 'select id from api_keys order by id limit 1';

export const migrationsFolder = fileURLToPath(new URL('../../migrations', import.meta.url));

/** Runs raw SQL and returns its rows; both drivers expose `rows`. */
export async function queryRows<T>(db: Db, query: SQL): Promise<T[]> {
  const result: unknown = await db.execute(query);
  return (result as { rows: T[] }).rows;
}

/**
 * Bind parameters one statement may carry on PGlite. Its protocol writer counts them in a signed
 * 16-bit field: with 32,800 a statement silently ran with the wrong parameters (a `where 1 in
 * (…)` matched nothing), and later statements of the session answered wrongly too (every key
 * unknown, lists empty) until a restart. Refused before anything is sent.
 */
export const PGLITE_MAX_PARAMETERS = 32_767;

/**
 * A failure of the engine itself, not an error PostgreSQL reported for a statement: the driver's
 * RangeError, or a PANIC (after one, PGlite answered every later statement `cannot drop active
 * portal` until a restart).
 */
const isEngineFailure = (error: unknown): error is Error =>
  error instanceof RangeError ||
  (error instanceof Error && ['PANIC', 'FATAL'].includes(String((error as { severity?: unknown }).severity)));

/** Below this much free space the embedded database does not open at all (a WAL segment is 16 MB). */
const OPEN_FLOOR_BYTES = 32 * 1024 * 1024;

export interface PgliteOptions {
  /** Called once when the engine fails below SQL: the server then exits for its supervisor. */
  onBroken?: (error: Error) => void;
  /** Writes are refused while less than this is free on the data directory's disk (0: never). */
  minFreeBytes?: number;
}

/**
 * The embedded PostgreSQL (PGlite + pgvector), persisted under `dir`, or in memory without one. It
 * runs on a thread of its own (pglite.worker.ts), so its statements never hold the server's thread.
 */
export async function openPglite(dir?: string, options: PgliteOptions = {}): Promise<Database> {
  if (dir !== undefined) mkdirSync(dir, { recursive: true });
  // After an engine failure PGlite may answer later statements wrongly rather than fail: from
  // then on every statement is refused with the cause and readiness fails, until a restart.
  let broken: Error | undefined;
  const markBroken = (error: Error) => {
    if (broken) return;
    broken = error;
    options.onBroken?.(error);
  };
  const minFreeBytes = options.minFreeBytes ?? 0;
  // Below a floor it does not open: say what is wrong instead of PGlite's failure. Between that
  // floor and the margin it opens, writes refused, so the data can be read and space freed (a
  // start refused at the margin could never recover on a volume holding only ragport).
  const openFloor = Math.min(minFreeBytes, OPEN_FLOOR_BYTES);
  const tooLittle = dir === undefined ? undefined : openShortage(dir, openFloor);
  if (tooLittle) throw tooLittle;
  const disk = dir !== undefined && minFreeBytes > 0 ? watchDisk(dir, minFreeBytes) : undefined;
  // Migrations and the start's own fixes are small and must run for the database to open.
  let migrating = false;
  const client = await startPgliteThread(dir, markBroken);
  const refusal = () =>
    new Error(`embedded database failed (${broken?.message ?? 'unknown'}); restart ragport to reopen it`);
  const guarded =
    <A extends unknown[], R>(method: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      if (broken) throw refusal();
      const statement = args[0];
      if (disk !== undefined && !migrating && typeof statement === 'string') {
        const shortage = givesSpaceBack(statement)
          ? openShortage(dir as string, openFloor)
          : mayWrite(statement)
            ? disk.shortage(parameterBytes(args[1]))
            : undefined;
        if (shortage) throw shortage;
      }
      const params = args[1];
      if (Array.isArray(params) && params.length > PGLITE_MAX_PARAMETERS) {
        throw new Error(
          `statement with ${params.length} bind parameters refused (at most ${PGLITE_MAX_PARAMETERS} on the embedded database)`,
        );
      }
      try {
        return await method(...args);
      } catch (error) {
        if (isEngineFailure(error)) markBroken(error);
        throw error;
      }
    };
  client.query = guarded(client.query.bind(client)) as typeof client.query;
  client.exec = guarded(client.exec.bind(client));
  const transaction = client.transaction.bind(client);
  client.transaction = guarded(((callback: Parameters<typeof client.transaction>[0]) =>
    transaction(async (tx) => {
      tx.query = guarded(tx.query.bind(tx)) as typeof tx.query;
      return callback(tx);
    })) as typeof client.transaction);
  const db = drizzlePglite(client as never, { schema }) as unknown as Db;
  const migrateEmbedded = async () => {
    const recorded = recordedMigrations((text) => client.query(text));
    const applied = await migrateKnown(knownMigrations(migrationsFolder), recorded, () =>
      migratePglite(db as never, { migrationsFolder }),
    );
    // Originals stored as they are, not compressed: compressing a text upload held the embedded
    // database's one session ~45 ms a MB, and every request waited (docs/operations.md, Originals
    // are stored uncompressed). A PostgreSQL server compresses them in the uploader's own session.
    await client.exec(
      `alter table documents alter column original set storage external;
       alter table ingestion_jobs alter column original set storage external`,
    );
    // A data directory is this process's alone (data-dir-lock.ts): a job still `running` in it
    // was claimed by a process that died (SIGKILL, a crash, the machine) and nobody renews its
    // lease. It ends now, so the worker takes the job at once, not INGESTION_LEASE_MS after the
    // restart (measured: documents stayed `processing` 28 s after a restart). The attempt stays
    // counted, as for any worker that died. The same for webhook deliveries it was sending
    // (their lease, 3 × WEBHOOK_TIMEOUT_MS + 5 s, held them 35 s with the defaults).
    if (dir !== undefined) {
      await client.exec(
        `update ingestion_jobs set lease_expires_at = now() where status = 'running' and lease_expires_at > now();
         update webhook_deliveries set lease_expires_at = now() where status = 'pending' and lease_expires_at > now()`,
      );
    }
    return applied;
  };
  return {
    kind: 'pglite',
    db,
    migrate: async () => {
      migrating = true;
      try {
        return await migrateEmbedded();
      } finally {
        migrating = false;
      }
    },
    ping: async () => {
      await client.query(readinessQuery);
      // Not ready while writes are refused: uploads, keys and chats would all fail here.
      const shortage = disk?.shortage();
      if (shortage) throw shortage;
    },
    listen: async (channel, onMessage) => {
      const unsubscribe = await client.listen(channel, onMessage);
      return { close: () => (client.closed ? Promise.resolve() : unsubscribe()) };
    },
    onWait: (listener) => client.onWait(listener),
    ...(dir === undefined ? {} : { beginBackup: () => beginBackup(client, dir) }),
    close: async () => {
      if (!client.closed) await client.close();
    },
  };
}

const BACKUP_SLOT = 'ragport_backup';
const dropBackupSlot = (client: RemoteQueryable) =>
  client.query('select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = $1', [
    BACKUP_SLOT,
  ]);

/** See `Database.beginBackup`: PostgreSQL's non-exclusive base backup, in PGlite's one session. */
async function beginBackup(client: RemoteQueryable, dataDir: string): Promise<OnlineBackup> {
  const stop = async () =>
    (await client.query<{ labelfile: string }>('select labelfile from pg_backup_stop(false)')).rows[0]?.labelfile ?? '';
  // A slot left by a backup that could not end keeps the log from being recycled: replaced.
  await dropBackupSlot(client);
  await client.query('select pg_create_physical_replication_slot($1, true, true)', [BACKUP_SLOT]);
  const started = performance.now();
  try {
    await client.query("select pg_backup_start('ragport', true)");
  } catch (error) {
    // 55000: a backup is already in progress in this session (one that could not end): end it, begin again.
    if ((error as { code?: string }).code !== '55000') {
      await dropBackupSlot(client).catch(() => undefined);
      throw error;
    }
    await stop();
    await client.query("select pg_backup_start('ragport', true)");
  }
  const heldMs = performance.now() - started;
  // Each step once, however often asked; a failed one may be asked again.
  let label: Promise<string> | undefined;
  let released: Promise<void> | undefined;
  const leave = () =>
    (label ??= stop().catch((error: unknown) => {
      label = undefined;
      throw error;
    }));
  return {
    dataDir,
    heldMs,
    stop: leave,
    end: () =>
      (released ??= (async () => {
        await leave();
        await dropBackupSlot(client);
      })().catch((error: unknown) => {
        released = undefined;
        throw error;
      })),
  };
}

// Arbitrary constant shared by every ragport process: only one of them migrates at a time.
const MIGRATION_LOCK_ID = 7_305_112_042;

export interface PostgresOptions {
  url: string;
  poolSize: number;
  onPoolError?: (error: Error) => void;
}

/**
 * A PostgreSQL server through `pg`. A connection's error (a server restart, a terminated backend,
 * a failover) never crashes the process, whether the connection is idle or checked out.
 */
export function openPostgres(options: PostgresOptions): Database {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
  });
  // The pool listens for errors of idle connections only: it removes its listener while a
  // connection is checked out, and adds one for the time of a `pool.query`. A transaction holds
  // its connection between statements with no listener, and an 'error' emitted then (the backend
  // terminated while the transaction ran code) was unhandled and ended the process. Each
  // connection has its own listener; the statement that next uses it fails with the connection's
  // error (a 503), and releasing it with that error discards it.
  const checkedOut = new WeakSet<pg.PoolClient>();
  pool.on('acquire', (client) => checkedOut.add(client));
  pool.on('release', (_error, client) => checkedOut.delete(client));
  pool.on('connect', (client) => {
    let reported = false;
    client.on('error', (error) => {
      // An idle connection's error reaches the pool's listener below. A terminated backend sends
      // its reason, then the socket closes ("Connection terminated unexpectedly"): the first says why.
      if (!checkedOut.has(client) || reported) return;
      reported = true;
      options.onPoolError?.(error);
    });
  });
  pool.on('error', (error) => options.onPoolError?.(error));
  const db = drizzleNodePg(pool, { schema }) as unknown as Db;
  return {
    kind: 'postgres',
    db,
    migrate: async () => {
      const client = await pool.connect();
      try {
        await client.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
        const recorded = recordedMigrations((text) => client.query(text));
        return await migrateKnown(knownMigrations(migrationsFolder), recorded, () =>
          migrateNodePg(drizzleNodePg(client, { schema }), { migrationsFolder }),
        );
      } finally {
        await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_ID]).catch(() => undefined);
        client.release();
      }
    },
    ping: async () => {
      await db.execute(sql.raw(readinessQuery));
    },
    listen: async (channel, onMessage, onGap) => {
      const listener = await listen({
        url: options.url,
        channels: [channel],
        name: `ragport-${channel}`,
        onMessage: (_channel, payload) => onMessage(payload),
        onGap,
        onError: (error) => options.onPoolError?.(error),
      });
      return { close: () => listener.close() };
    },
    close: async () => {
      await pool.end();
    },
  };
}

export interface OpenDatabaseOptions {
  databaseUrl: string | undefined;
  dataDir: string;
  poolSize: number;
  onPoolError?: (error: Error) => void;
  /** The embedded engine failed below SQL (see openPglite). */
  onBroken?: (error: Error) => void;
  /** DATA_DIR_MIN_FREE_MB in bytes (see openPglite). */
  minFreeBytes?: number;
}

/** `DATABASE_URL` selects a PostgreSQL server; without it, the embedded database under DATA_DIR. */
export async function openDatabase(options: OpenDatabaseOptions): Promise<Database> {
  if (options.databaseUrl !== undefined) {
    return openPostgres({
      url: options.databaseUrl,
      poolSize: options.poolSize,
      ...(options.onPoolError ? { onPoolError: options.onPoolError } : {}),
    });
  }
  // One process owns the embedded database: a second opener is refused before it reads a byte.
  const lock = lockDataDir(options.dataDir);
  try {
    const database = await openPglite(path.join(options.dataDir, 'pg'), {
      ...(options.onBroken ? { onBroken: options.onBroken } : {}),
      ...(options.minFreeBytes === undefined ? {} : { minFreeBytes: options.minFreeBytes }),
    });
    const close = database.close.bind(database);
    return Object.assign(database, {
      close: async () => {
        await close();
        lock.release();
      },
    });
  } catch (error) {
    lock.release();
    throw error;
  }
}

/** The database as configured, with connection failures logged instead of crashing. */
export function openConfiguredDatabase(
  config: { databaseUrl: string | undefined; dataDir: string; databasePoolSize: number; dataDirMinFreeMb: number },
  logger: { warn: (obj: object, msg: string) => void },
  onBroken?: (error: Error) => void,
): Promise<Database> {
  return openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: config.databasePoolSize,
    minFreeBytes: config.dataDirMinFreeMb * 1024 * 1024,
    onPoolError: (error) => logger.warn({ err: error }, 'database connection failed'),
    ...(onBroken ? { onBroken } : {}),
  });
}
