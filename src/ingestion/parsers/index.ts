/**
 * Document parsing for ingestion: bytes in, plain text with paragraph breaks out. Pure — no
 * database, no HTTP, no network. Every failure a user can cause is a ParseError with a message
 * fit to show them.
 */
import { parseCsv } from './csv.ts';
import { parseDocx } from './docx.ts';
import { parseHtml } from './html.ts';
import { parseJsonDocument, parseJsonLines } from './json.ts';
import { parsePdf } from './pdf.ts';
import { parseLayoutText, parsePlainText } from './text.ts';
import type { DocumentFormat, ParsedDocument, ParseLimits } from './types.ts';

export { classifyUpload, contentTypeOf, detectFormat, sniffBytes } from './detect.ts';
export { ParseError } from './errors.ts';
export type { DocumentFormat, ParsedDocument, ParseLimits } from './types.ts';

export async function parseDocument(
  bytes: Uint8Array,
  format: DocumentFormat,
  limits?: ParseLimits,
): Promise<ParsedDocument> {
  const parsed = await parserFor(format)(bytes, limits);
  return { text: parsed.text, info: { format, ...parsed.info } };
}

type Parser = (bytes: Uint8Array, limits?: ParseLimits) => ParsedDocument | Promise<ParsedDocument>;

const parserFor = (format: DocumentFormat): Parser => {
  switch (format) {
    case 'txt':
      return parsePlainText;
    case 'md':
    case 'code':
      return parseLayoutText;
    case 'html':
      return parseHtml;
    case 'pdf':
      return parsePdf;
    case 'docx':
      return parseDocx;
    case 'csv':
      return parseCsv;
    case 'json':
      return parseJsonDocument;
    case 'jsonl':
      return parseJsonLines;
  }
};
