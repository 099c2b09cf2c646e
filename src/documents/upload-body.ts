import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest, onRequestHookHandler } from 'fastify';
import { AppError, invalidFromIssues } from '../http/errors.ts';
import { documentName, jsonUploadBody, multipartFields } from './documents.schemas.ts';
import type { Upload } from './documents.service.ts';

/** What a multipart upload may hold besides its one file; a field (metadata) up to 1 MB. */
const limits = { files: 1, fields: 10, parts: 20, fieldSize: 1024 * 1024 };

const oneFile = "Send exactly one file, in the field 'file'";

/**
 * The body limit of the routes that take a document as JSON: its content may be as large as a
 * file, and JSON escapes it. Python's json.dumps writes é (2 bytes of UTF-8) as \u00e9 (6), an
 * emoji (4) as two such escapes (12), a newline as \n: at most three times the content for any
 * text but raw control characters. Plus what a multipart upload allows its other fields. The
 * content itself is then held to the upload limit (`readJson`); 50 MB allows a body of 151 MB.
 */
export const jsonBodyLimit = (uploadLimitBytes: number): number => 3 * uploadLimitBytes + limits.fieldSize;

const tooLarge = (uploadLimitBytes: number): AppError =>
  new AppError({
    code: 'payload_too_large',
    message: `The document is larger than the upload limit of ${uploadLimitBytes} bytes`,
  });

/**
 * The multipart parser (busboy) throws plain errors for a body it cannot read ("Boundary not
 * found", "Unexpected end of form"): those are the client's, a 400. Its limits carry their own
 * status and pass through in plainer words; a second file is a malformed request, not a large one.
 */
function malformed(error: unknown, uploadLimitBytes: number): unknown {
  switch ((error as { code?: unknown }).code) {
    case 'FST_FILES_LIMIT':
      return new AppError({ code: 'invalid_value', message: oneFile, cause: error });
    case 'FST_REQ_FILE_TOO_LARGE':
      return tooLarge(uploadLimitBytes);
    case 'FST_FIELDS_LIMIT':
      return new AppError({
        code: 'payload_too_large',
        message: `Too many multipart fields (at most ${limits.fields})`,
      });
    case 'FST_PARTS_LIMIT':
      return new AppError({ code: 'payload_too_large', message: `Too many multipart parts (at most ${limits.parts})` });
    default:
      break;
  }
  if (error instanceof AppError || typeof (error as { statusCode?: unknown }).statusCode === 'number') return error;
  return new AppError({
    code: 'invalid_value',
    message: `Malformed multipart body: ${error instanceof Error ? error.message : String(error)}`,
    cause: error,
  });
}

async function readMultipart(request: FastifyRequest, uploadLimitBytes: number): Promise<Upload> {
  let file: { filename: string; bytes: Buffer; contentType: string } | undefined;
  const fields: Record<string, string> = {};
  try {
    for await (const part of request.parts()) {
      if (part.type === 'file') {
        if (part.fieldname !== 'file' || file !== undefined)
          throw new AppError({ code: 'invalid_value', message: oneFile });
        file = { filename: part.filename, bytes: await part.toBuffer(), contentType: part.mimetype };
      } else {
        // Cut at the limit by the parser: refused whole, not read as the half it kept (1 MB of
        // metadata was "metadata must be a JSON object").
        if (part.valueTruncated) {
          throw new AppError({
            code: 'payload_too_large',
            message: `Multipart field '${part.fieldname}' is larger than ${limits.fieldSize} bytes`,
          });
        }
        fields[part.fieldname] = typeof part.value === 'string' ? part.value : JSON.stringify(part.value);
      }
    }
  } catch (error) {
    throw malformed(error, uploadLimitBytes);
  }
  if (file === undefined)
    throw new AppError({ code: 'missing_field', message: "file: required (multipart field 'file')" });
  const name = documentName.safeParse(file.filename);
  if (!name.success) {
    const message = `file: the file name ${name.error.issues[0]?.message ?? 'is not valid'}`;
    throw new AppError({ code: 'invalid_value', message });
  }
  if (file.bytes.length === 0) throw new AppError({ code: 'invalid_value', message: 'file: the file is empty' });
  const parsed = multipartFields.safeParse(fields);
  if (!parsed.success) throw invalidFromIssues(parsed.error.issues, { prefix: '', whole: 'body' });
  const { bytes, contentType } = file;
  return { name: name.data, bytes, contentType, description: parsed.data.description, metadata: parsed.data.metadata };
}

function readJson(body: unknown, uploadLimitBytes: number): Upload {
  const parsed = jsonUploadBody.safeParse(body);
  if (!parsed.success) throw invalidFromIssues(parsed.error.issues, { prefix: '', whole: 'body' });
  const { name, content, description, metadata } = parsed.data;
  const bytes = Buffer.from(content, 'utf8');
  if (bytes.length > uploadLimitBytes) throw tooLarge(uploadLimitBytes);
  return { name, bytes, contentType: undefined, description, metadata };
}

/** The document a request carries, as a multipart file or as JSON `{name, content, ...}`. */
export async function readUpload(request: FastifyRequest, uploadLimitBytes: number): Promise<Upload> {
  return request.isMultipart() ? readMultipart(request, uploadLimitBytes) : readJson(request.body, uploadLimitBytes);
}

/**
 * A JSON body declared longer than `jsonBodyLimit` is refused before it is read, with the limits
 * (fastify's own 413 names none), and its connection closed rather than the rest read to be
 * thrown away. One sent in chunks, without a length, is cut off as it is read.
 */
export function declaredJsonWithin(uploadLimitBytes: number): onRequestHookHandler {
  const bodyLimit = jsonBodyLimit(uploadLimitBytes);
  return (request, reply, done) => {
    const json = request.headers['content-type']?.split(';')[0]?.trim().toLowerCase() === 'application/json';
    if (json && Number(request.headers['content-length']) > bodyLimit) {
      void reply.header('connection', 'close');
      done(
        new AppError({
          code: 'payload_too_large',
          message: `Request body is too large: a JSON upload may be at most ${bodyLimit} bytes, its content at most ${uploadLimitBytes}`,
        }),
      );
      return;
    }
    done();
  };
}

/**
 * The body parsers of the documents' routes: multipart (with the limits above) besides the app's
 * JSON, and for anything else a 415 that names the types the route takes (fastify's names JSON
 * alone, wrong for the routes that take a file).
 */
export async function registerUploadParsers(fastify: FastifyInstance, uploadLimitBytes: number): Promise<void> {
  await fastify.register(multipart, { limits: { ...limits, fileSize: uploadLimitBytes } });
  fastify.addContentTypeParser('*', (request, _body, done) => {
    const types = Object.keys(request.routeOptions.config.documentedBody ?? {});
    const send = types.length > 0 ? types.join(' or ') : 'application/json';
    done(
      new AppError({ code: 'unsupported_media_type', message: `Unsupported Content-Type; send ${send}` }),
      undefined,
    );
  });
}
