/**
 * OCR of scanned PDFs with the installed Tesseract: a text PDF rendered to an image-only PDF in
 * the test is read back in page order, bounded by the page cap, and its words are found through
 * rag_search. Skipped (and said) where tesseract is not installed.
 */
import { describe, expect, it } from 'vitest';
import { probeOcr } from '../../src/ingestion/ocr.ts';
import { parseDocument } from '../../src/ingestion/parsers/index.ts';
import { startTestApp } from '../support/app.ts';
import { createCollection, uploadFile, waitForDocument } from '../support/documents.ts';
import { scanPdf, textPdf } from '../support/scanned-pdf.ts';

const status = await probeOcr({ languages: 'eng', maxPages: 10, timeoutMs: 120_000 }, 1024);
const settings = status.settings;
if (settings === undefined) console.warn(`OCR tests skipped: ${status.detail}`);

const pages = [
  [
    'Harbour Maintenance Report',
    'The lighthouse keepers inspected the northern breakwater',
    'and found the granite blocks loosened by winter storms.',
  ],
  [
    'Orchard Survey Appendix',
    'Apple growers in the valley recorded an early frost',
    'that damaged the blossoms of the pear trees.',
  ],
];
const scanned = await scanPdf(textPdf(pages));

describe.skipIf(settings === undefined)('OCR for scanned PDFs', () => {
  const ocr = settings as NonNullable<typeof settings>;

  it('a scan has no text layer; with OCR its words come back, in page order', async () => {
    const plain = await parseDocument(scanned, 'pdf');
    expect(plain.text).toBe('');
    const read = await parseDocument(scanned, 'pdf', { ocr });
    expect(read.info).toMatchObject({ pages: 2, ocr_pages: 2 });
    const text = read.text.toLowerCase();
    for (const word of ['lighthouse', 'breakwater', 'granite', 'orchard', 'frost', 'blossoms']) {
      expect(text).toContain(word);
    }
    expect(text.indexOf('breakwater')).toBeLessThan(text.indexOf('blossoms'));
  }, 120_000);

  it('stops at the page cap and says so; pages with a text layer are not recognised', async () => {
    const capped = await parseDocument(scanned, 'pdf', { ocr: { ...ocr, maxPages: 1 } });
    expect(capped.info).toMatchObject({ ocr_pages: 1, ocr_skipped_pages: 1, truncated: 'ocr_limit' });
    expect(capped.text.toLowerCase()).toContain('breakwater');
    expect(capped.text.toLowerCase()).not.toContain('blossoms');

    // A mixed document: page 1 keeps its text layer, page 2 is a scan.
    const mixed = await scanPdf(textPdf(pages), { keepText: [1] });
    const read = await parseDocument(mixed, 'pdf', { ocr });
    expect(read.info).toMatchObject({ pages: 2, ocr_pages: 1 });
    const text = read.text.toLowerCase();
    expect(text.indexOf('breakwater')).toBeGreaterThanOrEqual(0);
    expect(text.indexOf('breakwater')).toBeLessThan(text.indexOf('blossoms'));
  }, 120_000);

  it('stops at the time limit instead of running on', async () => {
    const read = await parseDocument(scanned, 'pdf', { ocr: { ...ocr, timeoutMs: 1 } });
    expect(read.info).toMatchObject({ truncated: 'ocr_limit' });
    expect(read.info.ocr_skipped_pages).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it('an uploaded scan is searchable through rag_search, and /readyz says OCR is on', async () => {
    const t = await startTestApp({ config: { ingestionConcurrency: 1 } });
    try {
      const ready = (await (await fetch(`${t.url}/readyz`)).json()) as {
        checks: Record<string, { ok: boolean; detail: string }>;
      };
      expect(ready.checks.ocr).toMatchObject({ ok: true });
      expect(ready.checks.ocr?.detail).toMatch(/^tesseract \S+, languages eng/);

      await createCollection(t, 'scans');
      const r = await uploadFile(t, 'scans', 'scan.pdf', scanned, { type: 'application/pdf' });
      expect(r.status).toBe(202);
      const doc = await waitForDocument(t, ((await r.json()) as { id: string }).id, undefined, 120_000);
      expect(doc.status).toBe('processed');
      const search = await t.request('/api/v1/agent/tool-calling', {
        method: 'POST',
        json: {
          tool_name: 'rag_search',
          parameters: { query: 'lighthouse keepers breakwater granite', collection: 'scans', top_k: 3 },
        },
      });
      expect(search.status).toBe(200);
      const { results } = (await search.json()) as { results: { content: string }[] };
      expect(results.length).toBeGreaterThan(0);
      expect(results[0]?.content.toLowerCase()).toContain('breakwater');
    } finally {
      await t.close();
    }
  }, 180_000);
});
