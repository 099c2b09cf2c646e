import { statfsSync } from 'node:fs';

/** PostgreSQL's disk_full: the error handler answers it 503, saying the disk is full. */
export const DISK_FULL_CODE = '53100';

/**
 * Statements that cannot write: a SELECT (or WITH … SELECT, SHOW, EXPLAIN) with no data-changing
 * clause. Anything else may need the disk (a row, an index page, a WAL segment).
 */
const readOnly = /^\s*(select|with|show|explain)\b/i;
// pg_backup_start and replication slots write a WAL segment of their own (a backup at 10 MB free
// hit ENOSPC and left the engine answering 500 to everything).
const writes =
  /\b(insert|update|delete|merge|nextval|setval|into|for\s+(no\s+key\s+)?update|for\s+(key\s+)?share|pg_(create|drop|backup|switch|start|stop)\w*)\b/i;
// How space comes back: refusing them would keep a short disk short for good.
const maintenance = /^\s*(vacuum|analyze|checkpoint)\b/i;
export const mayWrite = (sql: string) => !maintenance.test(sql) && (!readOnly.test(sql) || writes.test(sql));
// Ending a backup: a WAL record and a segment switch, then the log the backup held is let go.
// Refused with the margin like any write, a backup begun just above it could not end, and the
// log it held grew with every write until the next backup (160 → 336 MB in a probe).
const endsBackup = /^\s*select\s+(labelfile\s+from\s+pg_backup_stop|pg_drop_replication_slot)\b/i;
/** Statements that give space back: allowed down to the floor the database needs to open. */
export const givesSpaceBack = (sql: string) => endsBackup.test(sql);

/** Bytes a statement's parameters carry: what it may write at least once in rows and again in the WAL. */
export function parameterBytes(params: unknown): number {
  if (!Array.isArray(params)) return 0;
  let bytes = 0;
  for (const value of params) {
    if (typeof value === 'string') bytes += Buffer.byteLength(value);
    else if (value instanceof Uint8Array) bytes += value.byteLength;
  }
  return bytes;
}

export interface DiskGuard {
  /** Undefined while there is room for `writing` more bytes above the margin; else why not. */
  shortage(writing?: number): Error | undefined;
}

const freeBytes = (dir: string) => {
  const stats = statfsSync(dir);
  return Number(stats.bavail) * Number(stats.bsize);
};
const mb = (bytes: number) => Math.floor(bytes / 1024 / 1024);

/**
 * Why the embedded database in `dir` cannot open, when it has less than `floorBytes` free: PGlite
 * opening on a disk without room fails as `PGlite failed to initialize properly`, or spins.
 */
export function openShortage(dir: string, floorBytes: number): Error | undefined {
  const free = freeBytes(dir);
  if (free >= floorBytes) return undefined;
  return Object.assign(
    new Error(
      `the embedded database's disk has ${mb(free)} MB free, less than the ${mb(floorBytes)} MB it needs to open: free space under ${dir} and start again`,
    ),
    { code: DISK_FULL_CODE },
  );
}

/**
 * Watches the free space of the embedded database's directory. PGlite that meets ENOSPC (a full
 * WAL segment cannot be zero-filled) does not fail the statement: its thread spins for good and
 * every request waits (a probe: 3 of 3 on a 64 MB disk). Writes are refused while less than
 * `minFreeBytes` is free, before they reach it; reads go on.
 */
export function watchDisk(dir: string, minFreeBytes: number, maxAgeMs = 100): DiskGuard {
  // Read again before a write when older than `maxAgeMs`: one statfs, a few microseconds. Polled
  // every second instead, a burst of uploads filled the last megabytes between two readings.
  let free = freeBytes(dir);
  let readAt = performance.now();
  const current = () => {
    if (performance.now() - readAt >= maxAgeMs) {
      try {
        free = freeBytes(dir);
      } catch {
        // The last reading stands.
      }
      readAt = performance.now();
    }
    return free;
  };
  return {
    shortage(writing = 0) {
      const now = current();
      // A large write is weighed before it starts: a 45 MB upload let through at 152 MB free
      // wrote ~95 MB (the row and its WAL) before the next statement of its transaction was
      // refused, and the disk stayed short for good.
      if (now - 3 * writing >= minFreeBytes) return undefined;
      return Object.assign(
        new Error(
          writing * 3 > now - minFreeBytes && now >= minFreeBytes
            ? `the embedded database's disk has ${mb(now)} MB free: a write of ${mb(writing)} MB would leave less than the ${mb(minFreeBytes)} MB it keeps free (DATA_DIR_MIN_FREE_MB)`
            : `the embedded database's disk has ${mb(now)} MB free, less than the ${mb(minFreeBytes)} MB it keeps free (DATA_DIR_MIN_FREE_MB): writes are refused until space is freed`,
        ),
        { code: DISK_FULL_CODE },
      );
    },
  };
}
