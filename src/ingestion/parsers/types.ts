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
}

export const defaultMaxChars = 10_000_000;
