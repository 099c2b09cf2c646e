import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { clientGone } from '../http/abort.ts';
import { principalOf } from '../http/auth.ts';
import { invalidFromIssues } from '../http/errors.ts';
import type { DocumentsService, Upload } from './documents.service.ts';
import {
  waitQuery,
  collectionDocumentsParams,
  documentList,
  documentParams,
  documentRecord,
  documentedPutJson,
  jsonUploadBody,
  listQuery,
  message,
  multipartUploadForm,
  replacedDocument,
  updateDocumentBody,
} from './documents.schemas.ts';
import { bodyStalled } from '../http/stalled-body.ts';
import { declaredJsonWithin, jsonBodyLimit, readUpload, registerUploadParsers } from './upload-body.ts';

const family = 'simple' as const;
const tags = ['documents'];

export interface DocumentsRoutesOptions {
  uploadLimitBytes: number;
}

export function documentsRoutes(documents: DocumentsService, options: DocumentsRoutesOptions) {
  const { uploadLimitBytes } = options;
  /**
   * The routes that take a document: JSON up to `jsonBodyLimit` (its content is then held to the
   * upload limit). A body that stops arriving is answered 408 by the app's `stalledBodyGuard`.
   */
  const takesDocument = {
    bodyLimit: jsonBodyLimit(uploadLimitBytes),
    onRequest: [declaredJsonWithin(uploadLimitBytes)],
  };
  /** The document in the request; undefined when its body stalled (answered 408 already). */
  const upload = async (request: FastifyRequest): Promise<Upload | undefined> => {
    try {
      return await readUpload(request, uploadLimitBytes);
    } catch (error) {
      if (bodyStalled(request)) return undefined;
      throw error;
    }
  };

  return async (fastify: FastifyInstance) => {
    await registerUploadParsers(fastify, uploadLimitBytes);
    const app = fastify.withTypeProvider<ZodTypeProvider>();

    app.post(
      '/api/v1/rag/collections/:collection_name/documents',
      {
        config: {
          access: 'write',
          family,
          documentedBody: { 'multipart/form-data': multipartUploadForm, 'application/json': jsonUploadBody },
        },
        ...takesDocument,
        schema: {
          operationId: 'uploadDocument',
          tags,
          description:
            "Upload a file as multipart/form-data (field `file`, optional `description` and `metadata` as a JSON string), or text as JSON {name, content, description?, metadata?}. Processing happens in the background: poll the document's `status`, or add `?wait=true` to answer once it is processed, failed or cancelled (200), or at `timeout` seconds with the state then (202).",
          params: collectionDocumentsParams,
          querystring: waitQuery,
          response: { 200: documentRecord, 202: documentRecord },
        },
      },
      async (request, reply) => {
        const content = await upload(request);
        if (content === undefined) return reply;
        const principal = principalOf(request);
        const created = await documents.upload(principal, request.params.collection_name, content);
        if (!request.query.wait) return reply.code(202).send(created);
        const { document, settled } = await documents.awaitSettled(
          principal,
          created.id,
          request.query.timeout * 1000,
          clientGone(reply),
        );
        return reply.code(settled ? 200 : 202).send(document);
      },
    );

    app.get(
      '/api/v1/rag/collections/:collection_name/documents',
      {
        config: { access: 'read', family },
        schema: {
          operationId: 'listDocuments',
          tags,
          params: collectionDocumentsParams,
          querystring: listQuery,
          response: { 200: documentList },
        },
      },
      async (request) =>
        documents.list(
          principalOf(request),
          request.params.collection_name,
          request.query.page,
          request.query.page_size,
        ),
    );

    app.get(
      '/api/v1/rag/documents/:document_id',
      {
        config: { access: 'read', family },
        schema: {
          operationId: 'getDocument',
          tags,
          description:
            'With `wait=true`, answers once the document is processed, failed or cancelled, or at `timeout` seconds with its state then (a long poll: nothing is polled while waiting).',
          params: documentParams,
          querystring: waitQuery,
          response: { 200: documentRecord },
        },
      },
      async (request, reply) => {
        const id = request.params.document_id;
        if (!request.query.wait) return documents.get(principalOf(request), id);
        const waited = await documents.awaitSettled(
          principalOf(request),
          id,
          request.query.timeout * 1000,
          clientGone(reply),
        );
        return waited.document;
      },
    );

    app.put(
      '/api/v1/rag/documents/:document_id',
      {
        config: {
          access: 'write',
          family,
          documentedBody: { 'multipart/form-data': multipartUploadForm, 'application/json': documentedPutJson },
        },
        ...takesDocument,
        schema: {
          operationId: 'updateDocument',
          tags,
          description:
            'With new content — a file as multipart/form-data, or JSON {name, content, description?, metadata?}, exactly as an upload — replaces the document in place (202): it is re-ingested under the same id, its current version stays searchable until the new one commits, and `version` counts up. With JSON {description?, metadata?} only, updates those (200).',
          params: documentParams,
          response: { 200: message, 202: replacedDocument },
        },
      },
      async (request, reply) => {
        const id = request.params.document_id;
        const principal = principalOf(request);
        const body: unknown = request.body;
        const hasContent = typeof body === 'object' && body !== null && 'content' in body;
        if (request.isMultipart() || hasContent) {
          const content = await upload(request);
          if (content === undefined) return reply;
          const replaced = await documents.replace(principal, id, content);
          return reply.code(202).send({ ...replaced, message: 'Document replacement queued' });
        }
        const patch = updateDocumentBody.safeParse(body);
        if (!patch.success) throw invalidFromIssues(patch.error.issues, { prefix: '', whole: 'body' });
        await documents.update(principal, id, patch.data);
        return reply.code(200).send({ message: 'Document updated' });
      },
    );

    app.post(
      '/api/v1/rag/documents/:document_id/cancel',
      {
        config: { access: 'write', family },
        schema: {
          operationId: 'cancelDocumentProcessing',
          tags,
          description:
            "Stops the document's pending or processing job (a worker stops between two embedding batches). The document ends `cancelled`, or back at `processed` with its previous version when the job was a replace. 409 when nothing is being processed.",
          params: documentParams,
          response: { 200: documentRecord },
        },
      },
      async (request) => documents.cancel(principalOf(request), request.params.document_id),
    );

    app.delete(
      '/api/v1/rag/documents/:document_id',
      {
        config: { access: 'delete', family },
        schema: { operationId: 'deleteDocument', tags, params: documentParams, response: { 200: message } },
      },
      async (request) => {
        await documents.delete(principalOf(request), request.params.document_id);
        return { message: 'Document deleted' };
      },
    );
  };
}
