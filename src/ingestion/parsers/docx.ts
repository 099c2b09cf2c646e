import { unzipSync, zipSync } from 'fflate';
import type { Unzipped } from 'fflate';
import mammoth from 'mammoth';
import { ParseError, messageOf } from './errors.ts';
import { HtmlRenderer, parseHtmlDocument } from './html-text.ts';
import { TextSink } from './text-sink.ts';
import type { ParsedDocument, ParseLimits } from './types.ts';

/** Declared uncompressed size of all the parts we extract. */
export const maxDocxUncompressedBytes = 200 * 1024 * 1024;
/** Word's XML compresses about 10:1; beyond this a part is a decompression bomb. */
export const maxDocxCompressionRatio = 200;

/**
 * DOCX with mammoth, which converts Word's paragraphs, lists, tables (nested ones included) and
 * hyperlinks to clean HTML; the HTML is then rendered like any page, table rows as lines of
 * " | "-separated cells. Its raw-text mode would flatten tables into one cell per paragraph.
 *
 * The zip is read with fflate first, from its central directory: sizes are checked before
 * anything is inflated, only the XML parts are inflated (into buffers of their declared size, so
 * a part that lies about its size cannot grow), and mammoth gets them re-packed uncompressed.
 * mammoth's own unzipper (JSZip) would inflate whatever the archive holds, images included.
 */
export async function parseDocx(bytes: Uint8Array, limits?: ParseLimits): Promise<ParsedDocument> {
  const parts = extractXmlParts(bytes);
  let html: string;
  try {
    const result = await mammoth.convertToHtml(
      { buffer: Buffer.from(zipSync(parts, { level: 0 })) },
      // Images are dropped from the package, so none may be read.
      { convertImage: mammoth.images.imgElement(async () => ({ src: '' })) },
    );
    html = result.value;
  } catch (error) {
    throw new ParseError(`DOCX could not be read: ${messageOf(error)}`, { cause: error });
  }
  const document = parseHtmlDocument(`<!doctype html><html><body>${html}</body></html>`);
  const sink = new TextSink(limits);
  for (const paragraph of new HtmlRenderer().render(document.body ?? document.documentElement).finish()) {
    if (!sink.add(paragraph)) break;
  }
  return sink.result();
}

const isXmlPart = (name: string): boolean => /\.(xml|rels)$/i.test(name);

function extractXmlParts(bytes: Uint8Array): Unzipped {
  let total = 0;
  let hasDocument = false;
  let bomb = false;
  let parts: Unzipped;
  try {
    parts = unzipSync(bytes, {
      filter: (entry) => {
        if (!isXmlPart(entry.name)) return false;
        if (entry.name === 'word/document.xml') hasDocument = true;
        total += entry.originalSize;
        // A stored or deflated part cannot be much larger than its compressed bytes say.
        if (entry.originalSize > Math.max(entry.size, 1024) * maxDocxCompressionRatio) bomb = true;
        return !bomb && total <= maxDocxUncompressedBytes;
      },
    });
  } catch (error) {
    throw new ParseError('DOCX is not a valid zip archive', { cause: error });
  }
  if (bomb || total > maxDocxUncompressedBytes) {
    throw new ParseError('DOCX expands to too much data (a possible zip bomb)');
  }
  if (!hasDocument) throw new ParseError('DOCX has no word/document.xml; it is not a Word document');
  return parts;
}
