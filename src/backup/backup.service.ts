import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { finished, type Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { Clock } from '../clock.ts';
import type { Database } from '../db/client.ts';
import { randomBase62 } from '../db/ids.ts';
import { AppError } from '../errors.ts';
import { archiveTree } from './archive.ts';

/** Where a backup's copy of the database waits to be read: beside it, so files can be cloned. */
const STAGING_PREFIX = '.backup-';

export interface Backup {
  /** The archive: gzipped tar holding `pg/`, the embedded database's directory. */
  stream: Readable;
  /** A file name for it, with the moment it was taken. */
  fileName: string;
  /** How long the database's statements waited while it was copied. */
  heldMs: number;
}

export interface BackupService {
  /** A consistent copy of the embedded database as of now, as an archive to stream. */
  take(): Promise<Backup>;
}

/**
 * Online backups of the embedded database (`GET /api/v1/backup`). The database is copied at a
 * checkpoint into DATA_DIR while its statements wait (`Database.snapshot`), then that copy is
 * archived as the client reads it and removed once read or abandoned. One at a time. A
 * PostgreSQL server is backed up with its own tools.
 */
export function createBackupService(deps: {
  database: Database;
  dataDir: string;
  logger: Logger;
  clock: Clock;
}): BackupService {
  const { database, dataDir, logger, clock } = deps;
  let underway = false;

  // A copy left by a process that stopped mid-backup (only the embedded database makes them).
  if (database.snapshot !== undefined)
    void readdir(dataDir)
      .then((names) =>
        Promise.all(
          names
            .filter((n) => n.startsWith(STAGING_PREFIX))
            .map((n) => rm(path.join(dataDir, n), { recursive: true, force: true })),
        ),
      )
      .catch(() => undefined);

  return {
    take: async () => {
      if (database.snapshot === undefined)
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
      const staging = path.join(dataDir, `${STAGING_PREFIX}${randomBase62(10)}`);
      const removeStaging = () =>
        rm(staging, { recursive: true, force: true }).catch((error: unknown) =>
          logger.warn({ err: error, path: staging }, "a backup's copy could not be removed"),
        );
      const takenAt = new Date(clock());
      let heldMs: number;
      try {
        ({ heldMs } = await database.snapshot(path.join(staging, 'pg')));
      } catch (error) {
        underway = false;
        await removeStaging();
        if ((error as NodeJS.ErrnoException).code === 'ENOSPC')
          throw new AppError({
            code: 'service_unavailable',
            message: `No room in DATA_DIR (${dataDir}) for the backup's copy of the database: it needs as much free space as the database takes`,
            cause: error,
          });
        throw error;
      }
      const started = clock();
      const stream = archiveTree(path.join(staging, 'pg'), 'pg');
      // Read whole, abandoned by its client, or failed: the copy goes, and the next may start.
      finished(stream, (error) => {
        underway = false;
        void removeStaging();
        const fields = { held_ms: Math.round(heldMs), seconds: (clock() - started) / 1_000 };
        if (error) logger.warn({ ...fields, err: error }, 'backup not read whole');
        else logger.info(fields, 'backup read');
      });
      const stamp = takenAt.toISOString().replace(/[:.]/g, '-');
      return { stream, fileName: `ragport-backup-${stamp}.tar.gz`, heldMs };
    },
  };
}
