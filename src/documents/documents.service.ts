import { createHash } from 'node:crypto';
import { isUniqueViolation } from '../db/errors.ts';
import { newId } from '../db/ids.ts';
import type { CollectionsService } from '../collections/collections.service.ts';
import { AppError, notFound } from '../errors.ts';
import { classifyUpload, contentTypeOf, sniffBytes } from '../ingestion/parsers/index.ts';
import { canUseCollection, type Principal } from '../keys/principal.ts';
import type { DocumentSummary, DocumentsRepository } from './documents.repository.ts';
import type { DocumentRecord } from './documents.schemas.ts';
import type { SettledWaiters } from './settled.ts';

export interface Upload {
  name: string;
  bytes: Buffer;
  contentType: string | undefined;
  description: string | undefined;
  metadata: Record<string, unknown> | undefined;
}

export interface DocumentsServiceDeps {
  repo: DocumentsRepository;
  collections: CollectionsService;
  /** Tells in-process workers a job is waiting, so they need not wait for their next poll. */
  onQueued: () => void;
  /** Long-polls for documents to settle (`?wait=true`). */
  settled: SettledWaiters;
}

/** States a document rests in until something is done to it; waiting ends at any of them. */
const restingStates: ReadonlySet<string> = new Set(['processed', 'failed', 'cancelled']);

const NOT_FOUND = 'Document not found';

export function toDocumentRecord(row: DocumentSummary): DocumentRecord {
  return {
    id: row.id,
    name: row.name,
    collection_name: row.collectionName,
    description: row.description,
    metadata: row.metadata,
    status: row.status,
    error: row.error,
    warning: row.warning,
    chunk_count: row.chunkCount,
    size_bytes: row.sizeBytes,
    content_type: row.contentType,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
    processed_at: row.processedAt?.toISOString() ?? null,
    version: row.version,
    replaced_at: row.replacedAt?.toISOString() ?? null,
    progress:
      row.status === 'processing' && row.stage !== null
        ? { stage: row.stage, chunks_embedded: row.chunksEmbedded, chunks_total: row.chunksTotal }
        : null,
  };
}

/** What an upload (or a replace) stores: its format, checked, and the hash that deduplicates it. */
function readUpload(upload: Upload) {
  const detected = classifyUpload(upload.name, upload.contentType, upload.bytes.subarray(0, sniffBytes));
  if (!detected.ok) throw new AppError({ code: 'unsupported_media_type', message: detected.message });
  return {
    name: upload.name,
    contentType: contentTypeOf(upload.contentType, detected.format),
    format: detected.format,
    sizeBytes: upload.bytes.length,
    sha256: createHash('sha256').update(upload.bytes).digest('hex'),
    original: upload.bytes,
  };
}

export function createDocumentsService({ repo, collections, onQueued, settled }: DocumentsServiceDeps) {
  const requireDocument = async (principal: Principal, id: string) => {
    const row = await repo.get(id);
    // A document in a collection the key may not use is reported exactly like a missing one.
    if (!row || !canUseCollection(principal, row.collectionName)) throw notFound(NOT_FOUND);
    return row;
  };

  const duplicate = (documentId: string) =>
    new AppError({ code: 'conflict', message: 'Document already exists', extra: { document_id: documentId } });

  return {
    async upload(principal: Principal, collectionName: string, upload: Upload): Promise<DocumentRecord> {
      const collection = await collections.requireAccessible(principal, collectionName);
      const content = readUpload(upload);
      const { sha256 } = content;
      const existing = await repo.findBySha(collection.id, sha256);
      if (existing) throw duplicate(existing.id);
      const id = newId('doc');
      let created;
      try {
        created = await repo.insertWithJob(
          {
            id,
            collectionId: collection.id,
            ...content,
            description: upload.description ?? null,
            metadata: upload.metadata ?? null,
          },
          { id: newId('job'), keyId: principal.keyId },
        );
      } catch (error) {
        if (!isUniqueViolation(error)) throw error;
        // A concurrent identical upload won the race.
        const winner = await repo.findBySha(collection.id, sha256);
        if (winner) throw duplicate(winner.id);
        throw error;
      }
      // The collection was deleted since it was looked up.
      if (created === undefined) throw notFound('Collection not found');
      onQueued();
      // The row as committed: a worker may already have claimed it by now.
      return toDocumentRecord({ ...created, collectionName: collection.name });
    },

    async list(principal: Principal, collectionName: string, page: number, pageSize: number) {
      const collection = await collections.requireAccessible(principal, collectionName);
      const { rows, total } = await repo.list(collection.id, page, pageSize);
      return { documents: rows.map(toDocumentRecord), page, page_size: pageSize, total };
    },

    /**
     * The document once it is processed, failed or cancelled, or as it is when `timeoutMs` passes
     * or the client goes (`settled` false). A document deleted meanwhile is a 404.
     */
    async awaitSettled(
      principal: Principal,
      id: string,
      timeoutMs: number,
      signal: AbortSignal,
    ): Promise<{ document: DocumentRecord; settled: boolean }> {
      await requireDocument(principal, id);
      let last: DocumentSummary | undefined;
      const done = await settled.until(id, timeoutMs, signal, async () => {
        last = await requireDocument(principal, id);
        return restingStates.has(last.status);
      });
      const row = done && last !== undefined ? last : await requireDocument(principal, id);
      return { document: toDocumentRecord(row), settled: done || restingStates.has(row.status) };
    },

    async get(principal: Principal, id: string): Promise<DocumentRecord> {
      return toDocumentRecord(await requireDocument(principal, id));
    },

    async update(
      principal: Principal,
      id: string,
      patch: { description?: string; metadata?: Record<string, unknown> },
    ) {
      await requireDocument(principal, id);
      await repo.update(id, patch);
    },

    /**
     * New content for the document, ingested under the same id. The current version stays
     * searchable until the new one commits; an unfinished earlier replace is superseded.
     * Description and metadata change only when given. A first upload that was cancelled or
     * failed may be sent again as it was.
     */
    async replace(principal: Principal, id: string, upload: Upload): Promise<DocumentRecord> {
      const row = await requireDocument(principal, id);
      const content = readUpload(upload);
      const existing = await repo.findBySha(row.collectionId, content.sha256, id);
      if (existing) throw duplicate(existing.id);
      const replaced = await repo.replaceWithJob(
        id,
        { ...content, description: upload.description ?? null, metadata: upload.metadata ?? null },
        { id: newId('job'), keyId: principal.keyId },
      );
      if (!replaced) throw notFound(NOT_FOUND);
      onQueued();
      return toDocumentRecord({ ...replaced, collectionName: row.collectionName });
    },

    /** Stops the document's pending or processing job; 409 when there is none. */
    async cancel(principal: Principal, id: string): Promise<DocumentRecord> {
      await requireDocument(principal, id);
      const result = await repo.cancel(id);
      if (result === undefined) throw notFound(NOT_FOUND);
      if (result === 'idle') {
        throw new AppError({ code: 'conflict', message: 'Document is not being processed: nothing to cancel' });
      }
      return toDocumentRecord(await requireDocument(principal, id));
    },

    async delete(principal: Principal, id: string): Promise<void> {
      await requireDocument(principal, id);
      if (!(await repo.delete(id))) throw notFound(NOT_FOUND);
    },
  };
}

export type DocumentsService = ReturnType<typeof createDocumentsService>;
