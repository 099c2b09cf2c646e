import { z } from 'zod';
import {
  FORBIDDEN_KEY_MESSAGE,
  holdsForbiddenKey,
  maxJsonNesting,
  nestsDeeperThan,
  wellFormedJson,
} from '../json-nesting.ts';

export const metadataSchema = z.record(z.string(), z.unknown());

/**
 * A document's name: a JSON upload's `name`, or a multipart file's filename (its last path
 * segment: the multipart parser drops the rest), by the same rules either way.
 */
export const documentName = z
  .string()
  .trim()
  .min(1, 'must not be empty or blank (send a name such as notes.txt)')
  .max(500, 'must be at most 500 characters');

export const jsonUploadBody = z.object({
  name: documentName,
  content: z.string().min(1),
  description: z.string().max(10_000).optional(),
  metadata: metadataSchema.optional(),
});
export type JsonUploadBody = z.infer<typeof jsonUploadBody>;

/** Multipart fields besides `file`; `metadata` is a JSON object sent as a string. */
export const multipartFields = z.object({
  description: z.string().max(10_000).optional(),
  metadata: z
    .string()
    .optional()
    .transform((value, ctx) => {
      if (value === undefined || value === '') return undefined;
      if (nestsDeeperThan(value, maxJsonNesting)) {
        ctx.addIssue({ code: 'custom', message: `metadata is nested too deeply (more than ${maxJsonNesting} levels)` });
        return z.NEVER;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(value);
      } catch {
        ctx.addIssue({ code: 'custom', message: 'metadata must be a JSON object' });
        return z.NEVER;
      }
      if (holdsForbiddenKey(parsed)) {
        ctx.addIssue({ code: 'custom', message: `metadata ${FORBIDDEN_KEY_MESSAGE}` });
        return z.NEVER;
      }
      const metadata = metadataSchema.safeParse(wellFormedJson(value, parsed));
      if (!metadata.success) {
        ctx.addIssue({ code: 'custom', message: 'metadata must be a JSON object' });
        return z.NEVER;
      }
      return metadata.data;
    }),
});

/** The multipart upload as the OpenAPI document shows it (the route reads the parts itself). */
export const multipartUploadForm = z.object({
  file: z.string().meta({
    format: 'binary',
    description: 'The document: txt, md, html, pdf, docx, csv, json, jsonl or source code',
  }),
  description: z.string().max(10_000).optional(),
  metadata: z.string().optional().meta({ description: 'A JSON object, as a string' }),
});

export const documentParams = z.object({ document_id: z.string().min(1).max(100) });
export const collectionDocumentsParams = z.object({ collection_name: z.string().min(1).max(200) });

export const listQuery = z.object({
  page: z.coerce.number().int().min(1).default(1),
  page_size: z.coerce.number().int().min(1).max(100).default(20),
});

/** `?wait=true[&timeout=s]`: answer once the document is processed, failed or cancelled. */
export const waitQuery = z.object({
  wait: z
    .enum(['true', 'false'])
    .optional()
    .transform((v) => v === 'true')
    .describe('Answer only once the document is processed, failed or cancelled (or at the timeout)'),
  timeout: z.coerce
    .number()
    .int()
    .min(1)
    .max(300)
    .default(30)
    .describe('Seconds to wait with wait=true (1–300, default 30)'),
});

export const documentStatus = z.enum(['pending', 'processing', 'processed', 'failed', 'cancelled']);

export const ingestionProgress = z
  .object({
    stage: z.enum(['parsing', 'chunking', 'embedding']),
    chunks_embedded: z.number().int().nullable(),
    chunks_total: z.number().int().nullable(),
  })
  .meta({
    description:
      'What the worker is doing while the document is `processing` (null otherwise); the counts are known from the `embedding` stage on.',
  });

export const documentRecord = z.object({
  id: z.string(),
  name: z.string(),
  collection_name: z.string(),
  description: z.string().nullable(),
  metadata: metadataSchema.nullable(),
  status: documentStatus,
  error: z.string().nullable(),
  warning: z.string().nullable().meta({
    description:
      'What the searchable version left out: its text was cut at a parse limit (characters per document, PDF pages, OCR pages or time), so the rest is not searchable; null when nothing was',
  }),
  chunk_count: z.number().int(),
  size_bytes: z.number().int(),
  content_type: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  processed_at: z.string().nullable(),
  version: z.number().int().meta({
    description: 'The searchable version: 1 for the upload, one more for each replace that committed',
  }),
  replaced_at: z.string().nullable().meta({ description: 'When the current version replaced the previous one' }),
  progress: ingestionProgress.nullable(),
});
export type DocumentRecord = z.infer<typeof documentRecord>;

export const documentListItem = documentRecord.pick({
  id: true,
  name: true,
  chunk_count: true,
  created_at: true,
  metadata: true,
  status: true,
  size_bytes: true,
  content_type: true,
  version: true,
  // What a client watching a list of uploads needs without a request per document.
  error: true,
  warning: true,
  progress: true,
});

export const documentList = z.object({
  documents: z.array(documentListItem),
  page: z.number().int(),
  page_size: z.number().int(),
  total: z.number().int(),
});

export const updateDocumentBody = z
  .object({ description: z.string().max(10_000).optional(), metadata: metadataSchema.optional() })
  .refine((b) => b.description !== undefined || b.metadata !== undefined, 'description or metadata is required');

export { message } from '../common.schemas.ts';

/** PUT with new content: the document record, the replace queued. */
export const replacedDocument = documentRecord.extend({ message: z.string() });

/** PUT's JSON body: new content (as an upload), or only a new description or metadata. */
export const documentedPutJson = z.union([jsonUploadBody, updateDocumentBody]);
