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
