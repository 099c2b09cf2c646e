import type { OcrSettings } from './ocr.ts';

export type DocumentFormat = 'txt' | 'md' | 'html' | 'pdf' | 'docx' | 'csv' | 'json' | 'jsonl' | 'code';

export interface ParsedDocument {
  /** Plain text; paragraphs are separated by a blank line so the chunker can respect them. */
  text: string;
  /** e.g. page count, sheet info; small */
  info: Record<string, string | number>;
}

export interface ParseLimits {
  /** Extraction stops once the text reaches this many characters; `info.truncated` says so. */
  maxChars?: number;
  /** PDF pages read at most (default 2,000); a page-count bomb stops here with `truncated: page_limit`. */
  maxPages?: number;
  /** OCR for PDF pages without a text layer; absent: such pages give no text. */
  ocr?: OcrSettings;
}

export const defaultMaxChars = 10_000_000;

/**
 * What a document's stored record says when its text was cut at a parse limit: the rest is not
 * searchable, and the uploader must be able to tell (it was dropped without a word). Null when
 * nothing was cut.
 */
export function truncationWarning(info: ParsedDocument['info'], maxChars: number): string | null {
  const reason = info.truncated;
  if (reason === undefined) return null;
  switch (reason) {
    case 'max_chars':
      return (
        `The text was cut at ${maxChars.toLocaleString('en-US')} characters, the limit per document: ` +
        'what follows is not searchable (split the document to index all of it)'
      );
    case 'page_limit':
      return 'Only the first pages of the PDF were read (the page limit per document): the rest is not searchable';
    case 'ocr_limit':
      return (
        'Some scanned pages were not recognised (OCR_MAX_PAGES or OCR_TIMEOUT_MS reached): ' +
        'their text is not searchable'
      );
    default:
      return `The text was cut short (${String(reason)}): the rest is not searchable`;
  }
}
