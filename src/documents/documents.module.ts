import type { CollectionsService } from '../collections/collections.service.ts';
import type { Database } from '../db/client.ts';
import { createDocumentsRepository } from './documents.repository.ts';
import { documentsRoutes } from './documents.routes.ts';
import { createDocumentsService, type DocumentsServiceDeps } from './documents.service.ts';
import { createSettledWaiters } from './settled.ts';

export interface DocumentsModuleDeps {
  /** The database itself, not only its query builder: `?wait=true` listens for settled documents. */
  database: Database;
  collections: CollectionsService;
  onQueued: DocumentsServiceDeps['onQueued'];
  uploadLimitBytes: number;
}

/** Documents: uploads (which queue ingestion jobs), replacing, cancelling, waiting, deleting. */
export function createDocumentsModule(deps: DocumentsModuleDeps) {
  const settled = createSettledWaiters(deps.database);
  const service = createDocumentsService({
    repo: createDocumentsRepository(deps.database.db),
    collections: deps.collections,
    onQueued: deps.onQueued,
    settled,
  });
  return {
    routes: documentsRoutes(service, { uploadLimitBytes: deps.uploadLimitBytes }),
    service,
    /** Ends the waits of `?wait=true` requests at once (202, the document as it is): shutting down. */
    releaseWaiters: () => settled.release(),
    /** Stops listening for settled documents. */
    close: () => settled.close(),
  };
}
