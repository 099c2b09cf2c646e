/**
 * Text decoding for the text formats. Uploads are UTF-8 unless they carry a UTF-16 byte order
 * mark; invalid sequences become U+FFFD rather than failing, because a stray byte in a large log
 * file should not cost the user the whole document.
 */
export function decodeText(bytes: Uint8Array): string {
  const [b0, b1] = bytes;
  // TextDecoder drops a BOM that matches its own encoding, so only the choice is made here.
  const encoding = b0 === 0xff && b1 === 0xfe ? 'utf-16le' : b0 === 0xfe && b1 === 0xff ? 'utf-16be' : 'utf-8';
  return new TextDecoder(encoding, { fatal: false, ignoreBOM: false }).decode(bytes);
}

/** Unix line endings, so that every parser splits lines and paragraphs the same way. */
export const unixLines = (text: string): string => text.replace(/\r\n?/g, '\n');
