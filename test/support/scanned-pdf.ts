/**
 * PDFs for OCR tests: a text PDF written by hand, and a "scan" of any PDF — each page rendered by
 * pdfjs onto a @napi-rs/canvas bitmap and stored as a JPEG image, with no text layer left.
 */
import { createCanvas } from '@napi-rs/canvas';
import { getDocument } from 'pdfjs-dist/legacy/build/pdf.mjs';
import type { PDFPageProxy } from 'pdfjs-dist/legacy/build/pdf.mjs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

type Part = string | Uint8Array;

/** A PDF file from its objects (numbered from 1 in order), with a correct cross-reference table. */
function assemble(objects: Part[][]): Uint8Array {
  const chunks: Buffer[] = [Buffer.from('%PDF-1.4\n%\xe2\xe3\xcf\xd3\n', 'latin1')];
  let length = chunks[0]?.length ?? 0;
  const offsets: number[] = [];
  const push = (part: Part) => {
    const bytes = typeof part === 'string' ? Buffer.from(part, 'latin1') : Buffer.from(part);
    chunks.push(bytes);
    length += bytes.length;
  };
  objects.forEach((parts, i) => {
    offsets.push(length);
    push(`${i + 1} 0 obj\n`);
    for (const part of parts) push(part);
    push('\nendobj\n');
  });
  const xref = length;
  push(`xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`);
  for (const offset of offsets) push(`${String(offset).padStart(10, '0')} 00000 n \n`);
  push(`trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`);
  return new Uint8Array(Buffer.concat(chunks));
}

const stream = (dict: string, data: Part): Part[] => {
  const length = typeof data === 'string' ? Buffer.byteLength(data, 'latin1') : data.length;
  return [`<< ${dict} /Length ${length} >>\nstream\n`, data, '\nendstream'];
};

const escape = (text: string) => text.replace(/[\\()]/g, (c) => `\\${c}`);

/** A Letter-size PDF with a real text layer: one page per entry, its lines in 16 pt Helvetica. */
export function textPdf(pages: string[][]): Uint8Array {
  const objects: Part[][] = [['<< /Type /Catalog /Pages 2 0 R >>'], []];
  const kids: string[] = [];
  const font = 3;
  objects.push(['<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>']);
  for (const lines of pages) {
    const page = objects.length + 1;
    kids.push(`${page} 0 R`);
    const text = lines.map((line) => `(${escape(line)}) Tj T*`).join(' ');
    objects.push([
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 ${font} 0 R >> >> /Contents ${page + 1} 0 R >>`,
    ]);
    objects.push(stream('', `BT /F1 16 Tf 22 TL 72 720 Td ${text} ET`));
  }
  objects[1] = [`<< /Type /Pages /Kids [${kids.join(' ')}] /Count ${pages.length} >>`];
  return assemble(objects);
}

const standardFontDataUrl =
  join(dirname(createRequire(import.meta.url).resolve('pdfjs-dist/package.json')), 'standard_fonts') + '/';

async function renderJpeg(page: PDFPageProxy, dpi: number) {
  const viewport = page.getViewport({ scale: dpi / 72 });
  const canvas = createCanvas(Math.ceil(viewport.width), Math.ceil(viewport.height));
  const context = canvas.getContext('2d');
  context.fillStyle = '#ffffff';
  context.fillRect(0, 0, canvas.width, canvas.height);
  await page.render({ canvas, viewport }).promise;
  return { jpeg: canvas.toBuffer('image/jpeg', 85), width: canvas.width, height: canvas.height };
}

/**
 * The PDF as a scanner would give it: every page (or the first `maxPages`) an image at `dpi`, no
 * text layer. Pages listed in `keepText` are copied as text pages instead (a mixed document).
 */
export async function scanPdf(
  bytes: Uint8Array,
  options: { dpi?: number; maxPages?: number; keepText?: number[] } = {},
): Promise<Uint8Array> {
  const dpi = options.dpi ?? 200;
  const task = getDocument({
    data: new Uint8Array(bytes),
    standardFontDataUrl,
    isOffscreenCanvasSupported: false,
    isImageDecoderSupported: false,
    verbosity: 0,
  });
  const source = await task.promise;
  const count = Math.min(source.numPages, options.maxPages ?? source.numPages);
  const objects: Part[][] = [['<< /Type /Catalog /Pages 2 0 R >>'], []];
  const kids: string[] = [];
  objects.push(['<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>']);
  for (let number = 1; number <= count; number += 1) {
    const page = await source.getPage(number);
    const { width, height } = page.getViewport({ scale: 1 });
    const at = objects.length + 1;
    kids.push(`${at} 0 R`);
    if (options.keepText?.includes(number)) {
      // Its words again as a text layer, in one line each.
      const content = await page.getTextContent();
      const lines = content.items.flatMap((item) => ('str' in item && item.str.trim() !== '' ? [item.str] : []));
      objects.push([
        `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 ${width} ${height}] /Resources << /Font << /F1 3 0 R >> >> /Contents ${at + 1} 0 R >>`,
      ]);
      objects.push(
        stream('', `BT /F1 12 Tf 16 TL 36 ${height - 48} Td ${lines.map((l) => `(${escape(l)}) Tj T*`).join(' ')} ET`),
      );
      continue;
    }
    const image = await renderJpeg(page, dpi);
    objects.push([
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 ${width} ${height}] /Resources << /XObject << /Im0 ${at + 2} 0 R >> >> /Contents ${at + 1} 0 R >>`,
    ]);
    objects.push(stream('', `q ${width} 0 0 ${height} 0 0 cm /Im0 Do Q`));
    objects.push(
      stream(
        `/Type /XObject /Subtype /Image /Width ${image.width} /Height ${image.height} /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode`,
        image.jpeg,
      ),
    );
    page.cleanup();
  }
  await task.destroy();
  objects[1] = [`<< /Type /Pages /Kids [${kids.join(' ')}] /Count ${count} >>`];
  return assemble(objects);
}
