import { statfsSync } from 'node:fs';

/** PostgreSQL's disk_full: the error handler answers it 503, saying the disk is full. */
export const DISK_FULL_CODE = '53100';

/**
 * Statements that cannot write: a SELECT (or WITH … SELECT, SHOW, EXPLAIN) with no data-changing
 * clause. Anything else may need the disk (a row, an index page, a WAL segment).
 */
const readOnly = /^\s*(select|with|show|explain)\b/i;
const writes = /\b(insert|update|delete|merge|nextval|setval|into|for\s+(no\s+key\s+)?update|for\s+(key\s+)?share)\b/i;
export const mayWrite = (sql: string) => !readOnly.test(sql) || writes.test(sql);

export interface DiskGuard {
  /** Undefined while there is room; else why writes are refused. */
  shortage(): Error | undefined;
  stop(): void;
}

/**
 * Watches the free space of the embedded database's directory. PGlite that meets ENOSPC (a full
 * WAL segment cannot be zero-filled) does not fail the statement: its thread spins for good and
 * every request waits (a probe: 3 of 3 on a 64 MB disk). Writes are refused while less than
 * `minFreeBytes` is free, before they reach it; reads go on.
 */
export function watchDisk(dir: string, minFreeBytes: number, maxAgeMs = 100): DiskGuard {
  const freeOf = (s: { bavail: number | bigint; bsize: number | bigint }) => Number(s.bavail) * Number(s.bsize);
  // Read again before a write when older than `maxAgeMs`: one statfs, a few microseconds. Polled
  // every second instead, a burst of uploads filled the last megabytes between two readings.
  let free = freeOf(statfsSync(dir));
  let readAt = performance.now();
  const current = () => {
    if (performance.now() - readAt >= maxAgeMs) {
      try {
        free = freeOf(statfsSync(dir));
      } catch {
        // The last reading stands.
      }
      readAt = performance.now();
    }
    return free;
  };
  const mb = (bytes: number) => Math.floor(bytes / 1024 / 1024);
  return {
    shortage() {
      const now = current();
      if (now >= minFreeBytes) return undefined;
      return Object.assign(
        new Error(
          `the embedded database's disk has ${mb(now)} MB free, less than the ${mb(minFreeBytes)} MB it keeps free (DATA_DIR_MIN_FREE_MB): writes are refused until space is freed`,
        ),
        { code: DISK_FULL_CODE },
      );
    },
    stop: () => undefined,
  };
}
