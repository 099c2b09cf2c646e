import { decodeText, unixLines } from './decode.ts';
import { normaliseInline, TextSink } from './text-sink.ts';
import type { ParsedDocument, ParseLimits } from './types.ts';

/** Blank-line separated blocks of a text file, with runs of blank lines collapsed. */
const blocks = (text: string): string[] => unixLines(text).split(/\n[ \t]*\n/);

/** Plain text: whitespace inside lines is normalised, line breaks within a paragraph are kept. */
export function parsePlainText(bytes: Uint8Array, limits?: ParseLimits): ParsedDocument {
  const sink = new TextSink(limits);
  for (const block of blocks(decodeText(bytes))) {
    const lines = block
      .split('\n')
      .map(normaliseInline)
      .filter((line) => line !== '');
    if (!sink.add(lines.join('\n'))) break;
  }
  return sink.result();
}

/**
 * Markdown and source code keep their indentation, which carries meaning (code blocks, nesting);
 * only trailing whitespace goes. Markdown syntax is left in: it reads fine to an embedding model
 * and the headings help the chunker's context.
 */
export function parseLayoutText(bytes: Uint8Array, limits?: ParseLimits): ParsedDocument {
  const sink = new TextSink(limits);
  const text = decodeText(bytes).replace(/\ufeff/g, '');
  for (const block of blocks(text)) {
    const lines = block.split('\n').map((line) => line.trimEnd());
    if (!sink.add(lines.join('\n').replace(/^\n+/, ''))) break;
  }
  return sink.result({ lines: unixLines(text).split('\n').length });
}
