import { createRequire } from 'node:module';
import type * as PdfJsModule from 'pdfjs-dist/legacy/build/pdf.mjs';
import { dirname, join } from 'node:path';
import { ParseError, messageOf } from './errors.ts';
import { OcrTimeout, ocrParagraphs, recognise, renderPage } from './ocr.ts';
import { pageParagraphs } from './pdf-layout.ts';
import type { PositionedText } from './pdf-layout.ts';
import { TextSink } from './text-sink.ts';
import type { ParsedDocument, ParseLimits } from './types.ts';

/**
 * PDF text layer with pdfjs-dist (Mozilla's PDF.js), the most widely used and best maintained
 * PDF engine in JavaScript: it decodes CID fonts, embedded and predefined CMaps, Type 3 fonts and
 * encrypted files. unpdf wraps the same engine as a serverless bundle; using pdfjs directly keeps
 * control of the CMap and font paths and of page-by-page extraction.
 *
 * The legacy build is the one meant for Node. The predefined CMaps (needed for CJK fonts that are
 * not embedded) and the standard fonts ship inside the package and are read from disk, so nothing
 * is fetched at run time.
 */

/** More pages than any real document we index; a page-count bomb stops here. */
export const defaultMaxPdfPages = 2000;

const packageRoot = dirname(createRequire(import.meta.url).resolve('pdfjs-dist/package.json'));
const cMapUrl = join(packageRoot, 'cmaps') + '/';
const standardFontDataUrl = join(packageRoot, 'standard_fonts') + '/';

type PdfJs = typeof PdfJsModule;
let pdfjs: Promise<PdfJs> | undefined;
// Loaded on first use: the module is large and most processes never see a PDF.
const loadPdfJs = (): Promise<PdfJs> => (pdfjs ??= import('pdfjs-dist/legacy/build/pdf.mjs'));

export async function parsePdf(bytes: Uint8Array, limits?: ParseLimits): Promise<ParsedDocument> {
  const { getDocument, VerbosityLevel } = await loadPdfJs();
  const task = getDocument({
    // A plain Uint8Array copy: pdfjs rejects Buffer (what pg returns for bytea) and detaches
    // the buffer it is given; the caller keeps theirs.
    data: new Uint8Array(bytes),
    cMapUrl,
    standardFontDataUrl,
    // Text only: no fonts are turned into browser fonts, no images decoded, no XFA forms.
    disableFontFace: true,
    useSystemFonts: false,
    isOffscreenCanvasSupported: false,
    isImageDecoderSupported: false,
    enableXfa: false,
    stopAtErrors: false,
    verbosity: VerbosityLevel.ERRORS,
  });
  try {
    const document = await task.promise.catch((error: unknown) => {
      throw translate(error);
    });
    const sink = new TextSink(limits);
    const pages = Math.min(document.numPages, limits?.maxPages ?? defaultMaxPdfPages);
    const ocr = limits?.ocr;
    const ocrDeadline = Date.now() + (ocr?.timeoutMs ?? 0);
    let ocrPages = 0;
    let ocrSkipped = 0;
    for (let number = 1; number <= pages && !sink.full; number += 1) {
      const page = await document.getPage(number);
      const content = await page.getTextContent();
      const items: PositionedText[] = [];
      for (const item of content.items) {
        if (!('str' in item)) continue;
        items.push({
          str: item.str,
          x: Number(item.transform[4]),
          y: Number(item.transform[5]),
          width: item.width,
          height: item.height,
          hasEOL: item.hasEOL,
        });
      }
      let paragraphs = pageParagraphs(items);
      // No text layer: a scanned page. Recognised in page order, within the page cap and the time limit.
      if (ocr !== undefined && items.every((item) => item.str.trim() === '')) {
        const left = ocrDeadline - Date.now();
        if (ocrPages >= ocr.maxPages || left <= 0) ocrSkipped += 1;
        else {
          ocrPages += 1;
          try {
            paragraphs = ocrParagraphs(await recognise(await renderPage(page), ocr, left));
          } catch (error) {
            if (!(error instanceof OcrTimeout)) {
              throw new ParseError(`OCR of page ${number} failed: ${messageOf(error)}`, { cause: error });
            }
            ocrSkipped += 1;
          }
        }
      }
      for (const paragraph of paragraphs) if (!sink.add(paragraph)) break;
      page.cleanup();
    }
    if (document.numPages > pages) sink.markTruncated('page_limit');
    if (ocrSkipped > 0) sink.markTruncated('ocr_limit');
    return sink.result({
      pages: document.numPages,
      ...(ocrPages > 0 ? { ocr_pages: ocrPages } : {}),
      ...(ocrSkipped > 0 ? { ocr_skipped_pages: ocrSkipped } : {}),
    });
  } catch (error) {
    throw error instanceof ParseError ? error : translate(error);
  } finally {
    await task.destroy();
  }
}

/** pdfjs reports problems as exceptions with a `name`; users get a sentence instead. */
function translate(error: unknown): ParseError {
  const name = error instanceof Error ? error.name : '';
  if (name === 'PasswordException') return new ParseError('PDF is encrypted', { cause: error });
  return new ParseError(`PDF could not be read: ${messageOf(error)}`, { cause: error });
}
