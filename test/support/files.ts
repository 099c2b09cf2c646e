import { constants, deflateRawSync, deflateSync } from 'node:zlib';
import { strToU8, zipSync } from 'fflate';

/**
 * Documents built in tests, byte by byte: minimal valid PDFs and DOCX packages, and the hostile
 * ones (decompression bombs, absurd nesting, huge page counts) built from the same parts.
 */

export const enc = (text: string): Uint8Array => new TextEncoder().encode(text);

/** A PDF object's body: text, or text and binary parts (a stream). */
export type PdfObject = string | (string | Uint8Array)[];

/** A PDF with correct xref offsets; object 1 is the catalog. `trailerExtra` adds e.g. an /Encrypt dictionary. */
export function makePdf(objects: PdfObject[], trailerExtra = ''): Uint8Array {
  const parts: Uint8Array[] = [];
  let length = 0;
  const push = (part: string | Uint8Array) => {
    const bytes = typeof part === 'string' ? Buffer.from(part, 'latin1') : part;
    parts.push(bytes);
    length += bytes.length;
  };
  push('%PDF-1.4\n');
  const offsets = objects.map((object, i) => {
    const offset = length;
    push(`${i + 1} 0 obj\n`);
    for (const part of [object].flat()) push(part);
    push('\nendobj\n');
    return offset;
  });
  const xref = length;
  push(`xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`);
  for (const offset of offsets) push(`${String(offset).padStart(10, '0')} 00000 n \n`);
  push(`trailer\n<< /Size ${objects.length + 1} /Root 1 0 R ${trailerExtra} >>\nstartxref\n${xref}\n%%EOF\n`);
  return Buffer.concat(parts);
}

const streamObject = (deflated: Uint8Array): PdfObject => [
  `<< /Length ${deflated.length} /Filter /FlateDecode >>\nstream\n`,
  deflated,
  '\nendstream',
];

/** A content stream, deflated. */
export const flateStream = (content: string): PdfObject =>
  streamObject(deflateSync(Buffer.from(content, 'latin1'), { level: 9 }));

const adler32 = (bytes: Uint8Array): number => {
  let a = 1;
  let b = 0;
  for (const byte of bytes) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  return ((b << 16) | a) >>> 0;
};

/** zlib's adler32_combine: the checksum of two byte runs from theirs and the second one's length. */
function adler32Combine(first: number, second: number, secondLength: number): number {
  const base = 65521;
  const rem = secondLength % base;
  let sum1 = first & 0xffff;
  let sum2 = (rem * sum1) % base;
  sum1 += (second & 0xffff) + base - 1;
  sum2 += ((first >>> 16) & 0xffff) + ((second >>> 16) & 0xffff) + base - rem;
  sum1 %= base;
  sum2 %= base;
  return ((sum2 << 16) | sum1) >>> 0;
}

/**
 * A zlib stream of `head`, then `body` `times` over, then `tail`, built without ever holding the
 * inflated bytes: each part is deflated once, ending on a full flush (byte-aligned, no reference
 * to earlier data), so its compressed copy can simply be repeated. 400 MB take about 400 kB.
 */
export function deflateRepeated(head: string, body: string, times: number, tail: string): Uint8Array {
  const flushed = (text: string) =>
    deflateRawSync(Buffer.from(text, 'latin1'), { level: 9, finishFlush: constants.Z_FULL_FLUSH });
  const parts = [Buffer.from([0x78, 0xda]), flushed(head), ...Array<Buffer>(times).fill(flushed(body))];
  parts.push(flushed(tail), deflateRawSync(Buffer.alloc(0)));
  const bodySum = adler32(Buffer.from(body, 'latin1'));
  let sum = adler32(Buffer.from(head, 'latin1'));
  for (let i = 0; i < times; i += 1) sum = adler32Combine(sum, bodySum, body.length);
  sum = adler32Combine(sum, adler32(Buffer.from(tail, 'latin1')), tail.length);
  const trailer = Buffer.alloc(4);
  trailer.writeUInt32BE(sum);
  return Buffer.concat([...parts, trailer]);
}

const page = (contents: number, extra = '') =>
  `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] /Contents ${contents} 0 R /Resources << /Font << /F1 3 0 R >> >> ${extra}>>`;
const helvetica = '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>';

/** `pages` pages that all show the same content stream (objects: catalog, pages, font, content, pages…). */
export function pdfWithPages(pages: number, content: PdfObject, catalogExtra = '', pageExtra = ''): Uint8Array {
  const kids = Array.from({ length: pages }, (_, i) => `${i + 5} 0 R`).join(' ');
  return makePdf([
    `<< /Type /Catalog /Pages 2 0 R ${catalogExtra}>>`,
    `<< /Type /Pages /Kids [${kids}] /Count ${pages} >>`,
    helvetica,
    content,
    ...Array.from({ length: pages }, () => page(4, pageExtra)),
  ]);
}

export const showText = (text: string): string => `BT /F1 12 Tf 20 100 Td (${text}) Tj ET`;

/** One page whose content stream inflates to `mb` MB of text operators: a decompression bomb of a few hundred kB. */
export const pdfStreamBomb = (mb: number): Uint8Array =>
  pdfWithPages(1, streamObject(deflateRepeated('BT /F1 12 Tf 20 100 Td ', '(a) Tj '.repeat(149_796), mb, 'ET')));

/** The maximum page count pdfjs is asked to read, each page a long run of words: minutes of work in a small file. */
export const pdfSlowPages = (pages = 2000, wordsPerPage = 4000): Uint8Array =>
  pdfWithPages(pages, flateStream(`BT /F1 12 Tf 20 100 Td ${'(word ) Tj 0 -1 Td '.repeat(wordsPerPage)}ET`));

/** Arrays and dictionaries nested `depth` deep in the catalog and in the page. */
export const pdfDeeplyNested = (depth: number): Uint8Array =>
  pdfWithPages(
    1,
    flateStream(showText('nested')),
    `/Deep ${'['.repeat(depth)}${']'.repeat(depth)} `,
    `/Deep ${'<< /A '.repeat(depth)}1${' >>'.repeat(depth)} `,
  );

const contentTypes =
  '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>';
const rootRels =
  '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>';

export const documentXml = (body: string): string =>
  `<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>${body}</w:body></w:document>`;

export const makeDocx = (documentPart: Uint8Array): Uint8Array =>
  zipSync({
    '[Content_Types].xml': strToU8(contentTypes),
    '_rels/.rels': strToU8(rootRels),
    'word/document.xml': documentPart,
  });
