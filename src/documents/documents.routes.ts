import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { clientGone } from '../http/abort.ts';
import { principalOf } from '../http/auth.ts';
import { AppError, invalidFromIssues } from '../http/errors.ts';
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
  multipartFields,
  multipartUploadForm,
  replacedDocument,
  updateDocumentBody,
} from './documents.schemas.ts';

const family = 'simple' as const;
const tags = ['documents'];

const limits = { files: 1, fields: 10, parts: 20 };

/** @fastify/multipart's own words for its limits ("reach fields limit") say little. */
const limitMessages: Record<string, string> = {
  FST_FILES_LIMIT: "Send exactly one file, in the field 'file'",
  FST_FIELDS_LIMIT: `Too many multipart fields (at most ${limits.fields})`,
  FST_PARTS_LIMIT: `Too many multipart parts (at most ${limits.parts})`,
};

/**
 * The multipart parser (busboy) throws plain errors for a body it cannot read ("Boundary not
 * found", "Unexpected end of form"): those are the client's, a 400. Its limit errors carry their
 * own 4xx status (413) and pass through, in plainer words.
 */
function malformed(error: unknown): unknown {
  const code = (error as { code?: unknown }).code;
  const limit = typeof code === 'string' ? limitMessages[code] : undefined;
  if (limit !== undefined) return new AppError({ code: 'payload_too_large', message: limit, cause: error });
  if (error instanceof AppError || typeof (error as { statusCode?: unknown }).statusCode === 'number') return error;
  return new AppError({
    code: 'invalid_value',
    message: `Malformed multipart body: ${error instanceof Error ? error.message : String(error)}`,
    cause: error,
  });
}

async function readMultipart(request: FastifyRequest): Promise<Upload> {
  let file: { name: string; bytes: Buffer; contentType: string } | undefined;
  const fields: Record<string, string> = {};
  try {
    for await (const part of request.parts()) {
      if (part.type === 'file') {
        if (part.fieldname !== 'file' || file !== undefined) {
          throw new AppError({ code: 'invalid_value', message: "Send exactly one file, in the field 'file'" });
        }
        file = { name: part.filename, bytes: await part.toBuffer(), contentType: part.mimetype };
      } else {
        fields[part.fieldname] = typeof part.value === 'string' ? part.value : JSON.stringify(part.value);
      }
    }
  } catch (error) {
    throw malformed(error);
  }
  if (file === undefined)
    throw new AppError({ code: 'missing_field', message: "file: required (multipart field 'file')" });
  if (file.bytes.length === 0) throw new AppError({ code: 'invalid_value', message: 'file: the file is empty' });
  const parsed = multipartFields.safeParse(fields);
  if (!parsed.success) throw invalidFromIssues(parsed.error.issues, { prefix: '', whole: 'body' });
  return { ...file, description: parsed.data.description, metadata: parsed.data.metadata };
}

function readJson(body: unknown): Upload {
  const parsed = jsonUploadBody.safeParse(body);
  if (!parsed.success) throw invalidFromIssues(parsed.error.issues, { prefix: '', whole: 'body' });
  const { name, content, description, metadata } = parsed.data;
  return { name, bytes: Buffer.from(content, 'utf8'), contentType: undefined, description, metadata };
}

export function documentsRoutes(documents: DocumentsService, uploadLimitBytes: number) {
  return async (fastify: FastifyInstance) => {
    await fastify.register(multipart, {
      limits: { fileSize: uploadLimitBytes, fieldSize: 1024 * 1024, ...limits },
    });
    const app = fastify.withTypeProvider<ZodTypeProvider>();

    app.post(
      '/api/v1/rag/collections/:collection_name/documents',
      {
        config: {
          access: 'write',
          family,
          documentedBody: { 'multipart/form-data': multipartUploadForm, 'application/json': jsonUploadBody },
        },
        // JSON uploads carry the text itself, so they may be as large as a file.
        bodyLimit: uploadLimitBytes,
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
        const upload = request.isMultipart() ? await readMultipart(request) : readJson(request.body);
        const principal = principalOf(request);
        const created = await documents.upload(principal, request.params.collection_name, upload);
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
        // New content may be as large as an upload.
        bodyLimit: uploadLimitBytes,
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
          const upload = request.isMultipart() ? await readMultipart(request) : readJson(body);
          const replaced = await documents.replace(principal, id, upload);
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
