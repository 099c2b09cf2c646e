import type { FastifyInstance } from 'fastify';
import { AppError } from '../errors.ts';
import { principalOf } from '../http/auth.ts';
import type { BackupService } from './backup.service.ts';

export function backupRoutes(backups: BackupService) {
  return async (fastify: FastifyInstance) => {
    fastify.get(
      '/api/v1/backup',
      {
        // A HEAD would take a backup to send nothing.
        exposeHeadRoute: false,
        config: {
          access: 'admin',
          family: 'structured',
          documentedResponse: {
            'application/gzip':
              'A gzipped tar holding `pg/`, the embedded database as of the end of the download: extract it into an empty DATA_DIR and start ragport there to restore.',
          },
        },
        schema: {
          operationId: 'downloadBackup',
          tags: ['operations'],
          description:
            "A backup of the embedded database (PGlite) taken while the server runs and archived as it is read (PostgreSQL's base backup: a checkpoint, whose hold on the database the header x-ragport-backup-held-ms gives, the files read as the database runs on, then the write-ahead log); restored, it is the database as of the end of the download. One at a time (409 while another is read); not for a key restricted to collections (403). An instance on a PostgreSQL server (DATABASE_URL) answers 409: back that up with pg_dump.",
        },
      },
      async (request, reply) => {
        // A backup holds every collection: a key limited to some may not take one.
        if (principalOf(request).collections !== null)
          throw new AppError({
            code: 'insufficient_scope',
            message: 'A key restricted to collections cannot take a backup: it holds every collection',
          });
        const backup = await backups.take();
        return reply
          .header('content-type', 'application/gzip')
          .header('content-disposition', `attachment; filename="${backup.fileName}"`)
          .header('x-ragport-backup-held-ms', String(Math.round(backup.heldMs)))
          .send(backup.stream);
      },
    );
  };
}
