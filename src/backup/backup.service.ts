import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { Clock } from '../clock.ts';
import type { Database } from '../db/client.ts';
import { AppError } from '../errors.ts';
import { archiveDataDir } from './archive.ts';

export interface Backup {
  /** The archive: gzipped tar holding `pg/`, the embedded database's directory. */
  stream: Readable;
  /** A file name for it, with the moment it was begun. */
  fileName: string;
  /** How long the backup's checkpoint held the database's session. */
  heldMs: number;
}

export interface BackupService {
  /** A backup of the embedded database, begun now, as an archive to stream. */
  take(): Promise<Backup>;
}

/** How often a backup that could not end is ended again. */
const END_RETRY_MS = 30_000;

/**
 * Online backups of the embedded database (`GET /api/v1/backup`): PostgreSQL's base backup, in
 * PGlite's session — backup mode begun (a checkpoint), the data directory archived as the client
 * reads it while the database runs on, backup mode ended, the write-ahead log written meanwhile
 * and the backup label added (`Database.beginBackup`, archive.ts). A server started on the
 * extracted archive recovers to the moment backup mode ended. One at a time. A PostgreSQL server
 * is backed up with its own tools.
 */
export function createBackupService(deps: { database: Database; logger: Logger; clock: Clock }): BackupService {
  const { database, logger, clock } = deps;
  let underway = false;
  // A backup that could not end (its statements refused, say) keeps backup mode and the log it
  // held, which grows until it ends: tried again until it does, or until the next backup begins
  // (which ends whatever a previous one left, in the same session).
  let retry: NodeJS.Timeout | undefined;
  /** The last backup ending (leaving backup mode, letting its log go); never rejects. */
  let ending: Promise<void> | undefined;
  const endLater = (end: () => Promise<void>) => {
    retry = setTimeout(() => {
      retry = undefined;
      end().then(
        () => logger.info('the database left backup mode'),
        () => endLater(end),
      );
    }, END_RETRY_MS);
    retry.unref();
  };
  return {
    take: async () => {
      if (database.beginBackup === undefined)
        throw new AppError({
          code: 'conflict',
          message:
            database.kind === 'postgres'
              ? 'This server keeps its data on a PostgreSQL server (DATABASE_URL): back that up with its own tools (pg_dump); /api/v1/backup copies the embedded database'
              : 'The embedded database runs in memory here (no data directory): there is nothing on disk to back up',
        });
      if (underway)
        throw new AppError({ code: 'conflict', message: 'A backup is being taken; ask again once it has been read' });
      underway = true;
      clearTimeout(retry);
      retry = undefined;
      // The last one read whole may still be letting its log go (a statement's turn): waited
      // for, not a 409 to a client asking again at once.
      await ending;
      const begun = new Date(clock());
      let backup;
      try {
        backup = await database.beginBackup();
      } catch (error) {
        underway = false;
        throw error;
      }
      const { end, heldMs } = backup;
      // Backup mode ends once the data files are in; the log it needs is kept until the archive
      // holds it too (read whole or not): a checkpoint meanwhile recycled segments a slow
      // download had not reached yet, and its archive, complete to the client, did not restore.
      const stream = archiveDataDir(backup.dataDir, backup.stop);
      // Read whole, abandoned by its client, or failed: backup mode ends (if the archive has not
      // ended it already), and the next may begin. At its last byte, not at the stream's 'close'
      // (what `finished` waits for): that comes after the archive's thread has been terminated,
      // which on a busy machine took long enough for a client asking again at once to get a 409.
      let settled = false;
      const settle = (error?: Error) => {
        if (settled) return;
        settled = true;
        const fields = { held_ms: Math.round(heldMs), seconds: (clock() - begun.getTime()) / 1_000 };
        const ended: Promise<void> = end()
          .catch((endError: unknown) => {
            logger.error({ err: endError }, 'the database could not leave backup mode; trying again every 30 s');
            endLater(end);
          })
          .finally(() => {
            if (ending === ended) ending = undefined;
          });
        ending = ended;
        underway = false;
        if (error) logger.warn({ ...fields, err: error }, 'backup not read whole');
        else logger.info(fields, 'backup read');
      };
      stream.once('end', () => settle());
      stream.once('error', (error: Error) => settle(error));
      stream.once('close', () => settle(stream.readableEnded ? undefined : new Error('the download was abandoned')));
      const stamp = begun.toISOString().replace(/[:.]/g, '-');
      return { stream, fileName: `ragport-backup-${stamp}.tar.gz`, heldMs };
    },
  };
}
