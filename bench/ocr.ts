/**
 * OCR throughput and accuracy on real documents: `node bench/ocr.ts [pages-per-file]`.
 * Each shared PDF's first pages are "scanned" (rendered at 200 dpi to an image-only PDF, as in
 * test/support/scanned-pdf.ts), then parsed with OCR exactly as a parser process does (render at
 * 300 dpi, Tesseract as a child process, one thread). Reports pages per second (wall clock, so on a
 * shared machine it is a floor) and the share of the text layer's words that OCR found.
 */
import { probeOcr } from '../src/ingestion/ocr.ts';
import { parseDocument } from '../src/ingestion/parsers/index.ts';
import { scanPdf } from '../test/support/scanned-pdf.ts';
import { saveResults } from './support.ts';
import { sharedDocument } from '../test/support/fixtures.ts';

const files = [
  'crazyones.pdf',
  'multi-column-2p.pdf',
  'layout-parser-paper-fast.pdf',
  'GeoBase_NHNC1_Data_Model_UML_EN.pdf',
];
const pagesPerFile = Number(process.argv[2] ?? 4);

const words = (text: string) => text.toLowerCase().match(/[a-z]{3,}/g) ?? [];

const status = await probeOcr({ languages: 'eng', maxPages: 1_000, timeoutMs: 3_600_000 }, 1024);
if (status.settings === undefined) throw new Error(`OCR is off: ${status.detail}`);
const ocr = status.settings;
console.log(status.detail);
console.log('| file | pages | seconds | pages/s | words found |\n|---|---|---|---|---|');

const rows = [];
let totalPages = 0;
let totalSeconds = 0;
for (const name of files) {
  const original = sharedDocument(name);
  const scanned = await scanPdf(original, { maxPages: pagesPerFile });
  // The reference: the text layer of the same pages.
  const reference = await parseDocument(original, 'pdf', { maxPages: pagesPerFile });
  const started = performance.now();
  const read = await parseDocument(scanned, 'pdf', { ocr });
  const seconds = (performance.now() - started) / 1000;
  const pages = Number(read.info.ocr_pages ?? 0);
  const found = new Set(words(read.text));
  const expected = words(reference.text);
  const recall = expected.filter((w) => found.has(w)).length / Math.max(1, expected.length);
  totalPages += pages;
  totalSeconds += seconds;
  rows.push({ name, pages, seconds, pagesPerSecond: pages / seconds, wordRecall: recall });
  console.log(
    `| ${name} | ${pages} | ${seconds.toFixed(1)} | ${(pages / seconds).toFixed(2)} | ${(recall * 100).toFixed(1)}% |`,
  );
}
console.log(
  `all: ${totalPages} pages in ${totalSeconds.toFixed(1)} s = ${(totalPages / totalSeconds).toFixed(2)} pages/s`,
);
console.log(
  saveResults('ocr', {
    detail: status.detail,
    rows,
    totalPages,
    totalSeconds,
    pagesPerSecond: totalPages / totalSeconds,
  }),
);
