import { linkSync, mkdirSync, readFileSync, rmSync, utimesSync, writeFileSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';

/**
 * One process owns the embedded database. PGlite has no lock of its own: a second process (a
 * second server, the keys CLI) opening the same directory works on its own copy in memory and
 * its writes are lost when either one checkpoints. So the owner holds `ragport.lock` in
 * DATA_DIR, created exclusively, naming its pid and host, and touched every few seconds.
 *
 * A lock left behind by a process that died is taken over: on the same host when its pid is gone
 * (or now belongs to a process started later), on another host (a recreated container on the
 * same volume) when it has not been touched for STALE_AFTER_MS. An OS file lock would need a
 * native addon; a lock directory or pid file alone cannot tell a crash from a live owner.
 */
export const LOCK_FILE = 'ragport.lock';
const HEARTBEAT_MS = 5_000;
const STALE_AFTER_MS = 6 * HEARTBEAT_MS;
/**
 * A lock file that holds no record. Locks are created whole (written aside, then linked into
 * place), so only a crash of another program's writer, a disk that lost the write, or a file
 * made by hand leaves one; past this age it is stale, whoever made it.
 */
const UNREADABLE_STALE_AFTER_MS = 2_000;

interface LockRecord {
  pid: number;
  host: string;
  /** Start time of the owner in clock ticks since boot (/proc/<pid>/stat), to detect pid reuse. */
  start: string | null;
  command: string;
  since: string;
}

export class DataDirLockedError extends Error {}

export interface DataDirLock {
  readonly file: string;
  release(): void;
}

/** Locks already held by this process, by file: a second open in the same process is refused too. */
const held = new Set<string>();

function startTicks(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readRecord(file: string): LockRecord | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as LockRecord;
  } catch {
    return undefined; // being written, or not ours: judged by its age below
  }
}

/** Why the lock in `file` still belongs to someone, or undefined when it is stale. */
function liveOwner(file: string): LockRecord | undefined {
  const record = readRecord(file);
  let touchedAgo: number;
  try {
    touchedAgo = Date.now() - statSync(file).mtimeMs;
  } catch {
    return undefined; // removed meanwhile
  }
  if (record === undefined) {
    return touchedAgo > UNREADABLE_STALE_AFTER_MS
      ? undefined
      : { pid: 0, host: '?', start: null, command: 'a lock being written', since: '?' };
  }
  if (record.host !== hostname()) {
    return touchedAgo > STALE_AFTER_MS
      ? undefined
      : record;
  }
  if (record.pid === process.pid) return held.has(file) ? record : undefined;
  if (!running(record.pid)) return undefined;
  const start = startTicks(record.pid);
  return start !== null && record.start !== null && start !== record.start ? undefined : record;
}

function lockedMessage(dataDir: string, owner: LockRecord): string {
  const who =
    owner.host === hostname()
      ? `process ${owner.pid} (${owner.command})`
      : `process ${owner.pid} on host ${owner.host} (${owner.command})`;
  return (
    `DATA_DIR ${path.resolve(dataDir)} is in use by ${who} since ${owner.since}. ` +
    'The embedded database admits one process at a time: stop that process first, or manage keys ' +
    'through its API (/api/v1/keys with an admin key), or set DATABASE_URL to share a PostgreSQL server.'
  );
}

/**
 * Takes the data directory for this process, or throws DataDirLockedError naming the owner.
 * Released by `release()` and, as a last resort, when the process exits.
 */
export function lockDataDir(dataDir: string): DataDirLock {
  mkdirSync(dataDir, { recursive: true });
  const file = path.resolve(dataDir, LOCK_FILE);
  const record: LockRecord = {
    pid: process.pid,
    host: hostname(),
    start: startTicks(process.pid),
    command:
      process.argv
        .slice(1)
        .map((a) => path.basename(a))
        .join(' ') || 'node',
    since: new Date().toISOString(),
  };
  for (let attempt = 0; ; attempt++) {
    // Written aside and linked into place: the lock appears whole or not at all, never empty
    // (a process killed between creating the file and writing it left one that refused starts).
    const aside = `${file}.${process.pid}.tmp`;
    try {
      writeFileSync(aside, `${JSON.stringify(record)}\n`, { mode: 0o600 });
      try {
        linkSync(aside, file);
      } finally {
        rmSync(aside, { force: true });
      }
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = liveOwner(file);
      if (owner !== undefined || attempt > 0) {
        throw new DataDirLockedError(lockedMessage(dataDir, owner ?? readRecord(file) ?? record));
      }
      rmSync(file, { force: true }); // stale: its owner is gone
    }
  }
  held.add(file);
  const heartbeat = setInterval(() => {
    const now = new Date();
    try {
      utimesSync(file, now, now);
    } catch {
      // The directory went away; nothing left to guard.
    }
  }, HEARTBEAT_MS);
  heartbeat.unref();
  const release = () => {
    if (!held.delete(file)) return;
    clearInterval(heartbeat);
    process.off('exit', release);
    if (readRecord(file)?.pid === process.pid) rmSync(file, { force: true });
  };
  process.on('exit', release);
  return { file, release };
}
