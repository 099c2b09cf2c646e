import { isUtf8 } from 'node:buffer';
import { ParseError } from './errors.ts';

/** Invalid sequences tolerated in any file, and beyond that the share of the text they may be. */
const strayInvalidSequences = 16;
const maxInvalidShare = 0.01;

const replacements = (text: string): number => {
  let count = 0;
  for (let at = text.indexOf('\ufffd'); at >= 0; at = text.indexOf('\ufffd', at + 1)) count += 1;
  return count;
};

/**
 * Text decoding for the text formats. Uploads are UTF-8 unless they carry a UTF-16 byte order
 * mark. A few invalid sequences become U+FFFD rather than failing, because a stray byte in a
 * large log file should not cost the user the whole document; a file with many of them is in
 * another encoding (Latin-1, Shift JIS) or not text at all, and fails with a message that says so
 * instead of indexing garbage.
 */
export function decodeText(bytes: Uint8Array): string {
  const [b0, b1] = bytes;
  // TextDecoder drops a BOM that matches its own encoding, so only the choice is made here.
  const encoding = b0 === 0xff && b1 === 0xfe ? 'utf-16le' : b0 === 0xfe && b1 === 0xff ? 'utf-16be' : 'utf-8';
  const text = new TextDecoder(encoding, { fatal: false, ignoreBOM: false }).decode(bytes);
  if (encoding === 'utf-8' && !isUtf8(bytes)) {
    const invalid = replacements(text);
    if (invalid > strayInvalidSequences && invalid > text.length * maxInvalidShare) {
      throw new ParseError(
        `The file is not UTF-8 text: ${invalid} of its ${text.length} characters are invalid byte sequences; save it as UTF-8 and upload it again`,
      );
    }
  }
  return text;
}

/** Unix line endings, so that every parser splits lines and paragraphs the same way. */
export const unixLines = (text: string): string => text.replace(/\r\n?/g, '\n');
