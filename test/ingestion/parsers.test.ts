import { strToU8, zipSync } from 'fflate';
import { describe, expect, it } from 'vitest';
import {
  classifyUpload,
  contentTypeOf,
  detectFormat,
  parseDocument,
  ParseError,
} from '../../src/ingestion/parsers/index.ts';
import type { DocumentFormat } from '../../src/ingestion/parsers/index.ts';
import { documentXml, enc, makeDocx, makePdf } from '../support/files.ts';
import { sharedDocument } from '../support/fixtures.ts';

const parseFile = (name: string, format: DocumentFormat) => parseDocument(sharedDocument(name), format);
const flat = (text: string): string => text.replace(/\s+/g, ' ');

describe('shared documents', () => {
  const cases: [string, DocumentFormat, string[]][] = [
    [
      'multi-column-2p.pdf',
      'pdf',
      ['Dense Passage Retrieval for Open-Domain Question Answering', '3 Dense Passage Retriever (DPR)'],
    ],
    [
      'layout-parser-paper-fast.pdf',
      'pdf',
      ['Recent advances in document image analysis (DIA) have been primarily driven'],
    ],
    ['GeoBase_NHNC1_Data_Model_UML_EN.pdf', 'pdf', ['National Hydro Network', 'Service à la clientèle de GéoGratis']],
    // pypdf's fixture notes: the font's encoding loses the apostrophes.
    ['crazyones.pdf', 'pdf', ['Heres to the crazy ones', 'The round pegs in the square holes']],
    ['korean-text-with-tables.pdf', 'pdf', ['삼성카드 할인이 적용된 일시불', '빅포인트의 유효기간은 5년으로']],
    [
      'embedded-cmap-cidfont.pdf',
      'pdf',
      ['Heading in Helvetica This text uses an embedded CMap and should be extractable'],
    ],
    ['handbook-1p.docx', 'docx', ['The United States Trustee appoints and supervises standing trustees']],
    ['docx-tables.docx', 'docx', ['Header Col 1 | Header Col 2', 'Lorem ipsum | A link example']],
    ['ideas-page.html', 'html', ['The way to get new ideas is to notice anomalies']],
    ['example-with-scripts.html', 'html', ['Belarusian forces remain unlikely to attack Ukraine']],
    ['table-multi-row-column-cells-actual.csv', 'csv', ['Disability Category: Low Vision']],
    ['extract-text.md', 'md', ['# Extract Text from a PDF', 'reader = PdfReader("test Orient.pdf")']],
  ];

  it.each(cases)('%s has its known text', async (name, format, phrases) => {
    const { text, info } = await parseFile(name, format);
    for (const phrase of phrases) expect(flat(text)).toContain(phrase);
    expect(info.format).toBe(format);
    expect(text).not.toMatch(/\n{3,}/);
  });

  it('keeps a left-column sentence of a two-column page contiguous', async () => {
    const { text, info } = await parseFile('multi-column-2p.pdf', 'pdf');
    expect(info.pages).toBe(2);
    // Spans four lines of the left column, with two hyphenated breaks ("rea-sonable").
    expect(flat(text)).toContain(
      'Although reducing open-domain QA to machine reading is a very reasonable strategy, a huge performance degradation is often observed in practice',
    );
    // The right column follows the left one instead of being interleaved with it.
    expect(text.indexOf('improving retrieval')).toBeLessThan(text.indexOf('Retrieval in open-domain QA is usually'));
    expect(text).toContain('\n\n1 Introduction\n\n');
  });

  it('drops scripts, styles and navigation from a real page', async () => {
    const { text, info } = await parseFile('example-with-scripts.html', 'html');
    expect(info.extraction).toBe('readability');
    expect(text).not.toContain('stLight'); // only inside a <script>
    expect(text).not.toContain('nice_menus'); // only inside a <script>
    expect(text).not.toContain('Who We Are'); // the site's nav menu
    expect(text).not.toContain('Planned Giving');
  });

  it('renders docx tables row by row, nested tables included', async () => {
    const { text } = await parseFile('docx-tables.docx', 'docx');
    expect(text).toContain('a | >b< | c');
    expect(text).toContain('d | e, f; g&t, h | i');
    expect(text).toContain('j | k | l');
  });

  it('names CSV columns from a two-row header', async () => {
    const { text, info } = await parseFile('table-multi-row-column-cells-actual.csv', 'csv');
    expect(info).toMatchObject({ rows: 4, headerRows: 2, columns: 6 });
    const paragraphs = text.split('\n\n');
    expect(paragraphs).toHaveLength(4);
    expect(paragraphs[0]).toBe(
      [
        'Disability Category: Blind',
        'Participants: 5',
        'Ballots Completed: 1',
        'Ballots Incomplete/Terminated: 4',
        'Results / Accuracy: 34.5%, n=1',
        'Results / Time to complete: 1199 sec, n=1',
      ].join('\n'),
    );
  });
});

const helloPdfObjects = [
  '<< /Type /Catalog /Pages 2 0 R >>',
  '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
  '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
  '<< /Length 44 >>\nstream\nBT /F1 12 Tf 20 100 Td (Hello from PDF) Tj ET\nendstream',
  '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
];

describe('PDF robustness', () => {
  it('reads a hand-made PDF', async () => {
    const { text } = await parseDocument(makePdf(helloPdfObjects), 'pdf');
    expect(text).toBe('Hello from PDF');
  });

  it('reports a password-protected PDF as encrypted', async () => {
    const key = '<' + 'ab'.repeat(32) + '>';
    const objects = [...helloPdfObjects, `<< /Filter /Standard /V 1 /R 2 /O ${key} /U ${key} /P -4 >>`];
    const pdf = makePdf(
      objects,
      `/Encrypt 6 0 R /ID [<0123456789abcdef0123456789abcdef> <0123456789abcdef0123456789abcdef>]`,
    );
    await expect(parseDocument(pdf, 'pdf')).rejects.toThrow(new ParseError('PDF is encrypted'));
  });

  it('rejects a truncated PDF with a readable message', async () => {
    const bytes = sharedDocument('multi-column-2p.pdf').slice(0, 2000);
    await expect(parseDocument(bytes, 'pdf')).rejects.toThrow(/^PDF could not be read: /);
  });

  it('rejects bytes that are not a PDF at all', async () => {
    await expect(parseDocument(enc('%PDF-1.7\nnothing here'), 'pdf')).rejects.toBeInstanceOf(ParseError);
  });

  it('stops at the page cap and says so', async () => {
    const { text, info } = await parseDocument(sharedDocument('multi-column-2p.pdf'), 'pdf', { maxPages: 1 });
    expect(info).toMatchObject({ pages: 2, truncated: 'page_limit' });
    expect(text).toContain('Retrieval in open-domain QA is usually implemented');
    expect(text).not.toContain('3 Dense Passage Retriever (DPR)'); // page 2's heading
  });

  it('stops at maxChars and says so', async () => {
    const { text, info } = await parseDocument(sharedDocument('GeoBase_NHNC1_Data_Model_UML_EN.pdf'), 'pdf', {
      maxChars: 500,
    });
    expect(text.length).toBeLessThanOrEqual(500);
    expect(info).toMatchObject({ truncated: 'max_chars', pages: 19 });
  });
});

describe('DOCX robustness', () => {
  it('reads a minimal hand-made docx', async () => {
    const docx = makeDocx(strToU8(documentXml('<w:p><w:r><w:t>Hello from Word</w:t></w:r></w:p>')));
    expect((await parseDocument(docx, 'docx')).text).toBe('Hello from Word');
  });

  it('rejects a file that is not a zip', async () => {
    await expect(parseDocument(enc('just some text'), 'docx')).rejects.toThrow(
      new ParseError('DOCX is not a valid zip archive'),
    );
  });

  it('rejects a zip without word/document.xml', async () => {
    const zip = zipSync({ 'hello.txt': strToU8('hello') });
    await expect(parseDocument(zip, 'docx')).rejects.toThrow(/no word\/document\.xml/);
  });

  it('rejects a zip bomb before inflating it', async () => {
    // 4 MB of spaces deflate to a few kB: a ratio far beyond any real Word document.
    const bomb = makeDocx(strToU8(documentXml(' '.repeat(4 * 1024 * 1024))));
    expect(bomb.length).toBeLessThan(64 * 1024);
    await expect(parseDocument(bomb, 'docx')).rejects.toThrow(/zip bomb/);
  });

  it('does not trust a part that understates its size', async () => {
    const docx = makeDocx(strToU8(documentXml(`<w:p><w:r><w:t>${'word '.repeat(2000)}</w:t></w:r></w:p>`)));
    // Rewrite word/document.xml's uncompressed size in the central directory to 100 bytes.
    const view = new DataView(docx.buffer, docx.byteOffset, docx.byteLength);
    const name = enc('word/document.xml');
    for (let i = 0; i + 46 < docx.length; i += 1) {
      if (view.getUint32(i, true) !== 0x02014b50) continue;
      const nameLength = view.getUint16(i + 28, true);
      const entryName = docx.subarray(i + 46, i + 46 + nameLength);
      if (entryName.length === name.length && entryName.every((b, j) => b === name[j]))
        view.setUint32(i + 24, 100, true);
    }
    await expect(parseDocument(docx, 'docx')).rejects.toThrow(/^DOCX could not be read/);
  });
});

describe('text decoding', () => {
  it('replaces invalid UTF-8 instead of failing', async () => {
    const bytes = new Uint8Array([...enc('caf'), 0xc3, 0x28, ...enc(' ok\n\n\nnext  \t paragraph')]);
    expect((await parseDocument(bytes, 'txt')).text).toBe('caf\ufffd( ok\n\nnext paragraph');
  });

  it('refuses text in another encoding, saying so', async () => {
    // "Déjà vu à l'été" in Latin-1, many times: every accented letter is an invalid UTF-8 byte.
    const latin1 = new Uint8Array(Buffer.from("Déjà vu à l'été. ".repeat(50), 'latin1'));
    await expect(parseDocument(latin1, 'txt')).rejects.toThrow(
      /^The file is not UTF-8 text: 250 of its 850 characters are invalid byte sequences; save it as UTF-8/,
    );
    await expect(parseDocument(latin1, 'csv')).rejects.toThrow(/not UTF-8 text/);
    // A stray byte or two in a large file is still only replaced.
    const mostlyFine = new Uint8Array([...enc('ok '.repeat(1000)), 0xff, ...enc(' fine')]);
    expect((await parseDocument(mostlyFine, 'md')).text.endsWith('ok \ufffd fine')).toBe(true);
  });

  it('strips a UTF-8 BOM', async () => {
    expect((await parseDocument(new Uint8Array([0xef, 0xbb, 0xbf, ...enc('hi')]), 'txt')).text).toBe('hi');
  });

  it('decodes UTF-16 with a byte order mark, both byte orders', async () => {
    const le = new Uint8Array(Buffer.from('\ufeffgrüße, 世界', 'utf16le'));
    const be = new Uint8Array(le.length);
    for (let i = 0; i < le.length; i += 2) [be[i], be[i + 1]] = [le[i + 1] ?? 0, le[i] ?? 0];
    expect((await parseDocument(le, 'txt')).text).toBe('grüße, 世界');
    expect((await parseDocument(be, 'txt')).text).toBe('grüße, 世界');
  });

  it('keeps indentation in code', async () => {
    const { text } = await parseDocument(enc('def f():\n    return 1\n'), 'code');
    expect(text).toBe('def f():\n    return 1');
  });
});

describe('JSON', () => {
  it('renders keys next to their values', async () => {
    const { text } = await parseDocument(enc('{"name":"ragport","tags":["a","b"],"owner":{"id":7}}'), 'json');
    expect(text).toBe('name: ragport\n\ntags[0]: a\ntags[1]: b\n\nowner.id: 7');
  });

  it('reports a syntax error with its position', async () => {
    const error = await parseDocument(enc('{"a": 1,\n "b": }'), 'json').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ParseError);
    expect((error as ParseError).message).toBe(
      "The file is not valid JSON: Unexpected token '}' at position 15 (line 2 column 7)",
    );
    await expect(parseDocument(enc('[1, 2'), 'json')).rejects.toThrow(/at position 5 \(line 1 column 6\)/);
  });

  it('rejects absurd nesting instead of overflowing the stack', async () => {
    const deep = enc('['.repeat(100_000) + ']'.repeat(100_000));
    await expect(parseDocument(deep, 'json')).rejects.toThrow(/nested too deeply/);
  });

  it('gives one paragraph per JSON Lines record and names a bad line', async () => {
    const { text, info } = await parseDocument(enc('{"id":1,"t":"one"}\n\n{"id":2,"t":"two"}\n'), 'jsonl');
    expect(text).toBe('id: 1\nt: one\n\nid: 2\nt: two');
    expect(info.records).toBe(2);
    await expect(parseDocument(enc('{"id":1}\n{oops}\n'), 'jsonl')).rejects.toThrow(/^Line 2 is not valid JSON/);
  });
});

describe('HTML fallback', () => {
  it('keeps only the text of a short page', async () => {
    const html =
      '<nav>Home | About</nav><header>Site</header><p>Short note.</p><script>var secret = 1;</script><footer>© us</footer>';
    expect((await parseDocument(enc(html), 'html')).text).toBe('Short note.');
  });

  it('survives absurd nesting quickly (Readability would take minutes)', async () => {
    const html = '<div>'.repeat(20_000) + 'deep text' + '</div>'.repeat(20_000);
    const started = performance.now();
    const { text, info } = await parseDocument(enc(html), 'html');
    expect(text).toBe('deep text');
    expect(info.extraction).toBe('body');
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  it('renders the body without landmarks when Readability finds no article', async () => {
    // A script before <head> (as in ideas-page.html) must not hide the real <body>.
    const html =
      '<script>x()</script><head><title>T</title></head><body><nav><a href="/">Home</a></nav><table><tr><td>Name</td><td>Value</td></tr></table></body>';
    const { text } = await parseDocument(enc(html), 'html');
    expect(text).toBe('Name | Value');
  });
});

describe('detectFormat', () => {
  const none = new Uint8Array();
  it.each([
    ['notes.txt', undefined, 'txt'],
    ['README.md', undefined, 'md'],
    ['page.HTM', undefined, 'html'],
    ['data.csv', undefined, 'csv'],
    ['data.json', undefined, 'json'],
    ['events.ndjson', undefined, 'jsonl'],
    ['main.rs', undefined, 'code'],
    ['config.yml', undefined, 'code'],
    ['Dockerfile', undefined, 'code'],
    ['upload', 'text/markdown; charset=utf-8', 'md'],
    ['upload', 'application/json', 'json'],
    ['upload', 'text/x-python', 'txt'],
  ] as const)('%s (%s) is %s', (name, type, format) => {
    expect(detectFormat(name, type, none)).toBe(format);
  });

  it('trusts magic bytes over a wrong label', () => {
    const pdf = enc('%PDF-1.7\n');
    const zip = new Uint8Array([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00]);
    expect(detectFormat('scan.txt', 'application/octet-stream', pdf)).toBe('pdf');
    expect(detectFormat('report.docx', 'application/octet-stream', zip)).toBe('docx');
    expect(detectFormat('upload', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', zip)).toBe(
      'docx',
    );
    expect(detectFormat('archive.zip', 'application/zip', zip)).toBeUndefined();
    expect(detectFormat('fake.pdf', 'application/pdf', enc('hello'))).toBeUndefined();
  });

  it('finds a PDF header after leading junk only in a file labelled PDF', () => {
    const late = enc(`${'\n'.repeat(300)}%PDF-1.4\n`);
    expect(detectFormat('scan.pdf', undefined, late)).toBe('pdf');
    expect(detectFormat('notes.md', undefined, late)).toBe('md');
  });

  it('says why a mislabelled file is refused', () => {
    const html = enc('<!doctype html><html><body>not a PDF</body></html>');
    expect(classifyUpload('report.pdf', 'application/pdf', html)).toEqual({
      ok: false,
      message: "'report.pdf' is labelled PDF but is not one: its content does not start with %PDF-",
    });
    expect(classifyUpload('letter.docx', undefined, enc('plain words'))).toEqual({
      ok: false,
      message: "'letter.docx' is labelled DOCX but is not one: its content is not a zip archive",
    });
    expect(classifyUpload('image.txt', 'text/plain', new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0, 0]))).toMatchObject({
      ok: false,
      message: expect.stringMatching(/^Unsupported file type 'image.txt': its content is binary/),
    });
  });

  it('takes a PDF or DOCX content type as a label as much as the name', () => {
    const text = enc('plain words');
    expect(classifyUpload('notes.txt', 'application/pdf; charset=binary', text)).toEqual({
      ok: false,
      message:
        "'notes.txt' is labelled PDF (Content-Type application/pdf) but is not one: its content does not start with %PDF-",
    });
    expect(
      classifyUpload('notes.md', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', text),
    ).toMatchObject({ ok: false, message: expect.stringMatching(/^'notes.md' is labelled DOCX \(Content-Type /) });
    // A PDF header after leading junk counts for a file whose content type says PDF.
    expect(detectFormat('scan.txt', 'application/pdf', enc(`\n\n%PDF-1.4\n`))).toBe('pdf');
  });

  it('reads text with no extension at all as plain text; an extension it does not read is still refused', () => {
    const text = enc('Leave policy: 30 days a year.');
    for (const name of ['README', 'LICENSE', 'docs/NOTES', 'notes.']) {
      expect(classifyUpload(name, 'application/octet-stream', text), name).toEqual({ ok: true, format: 'txt' });
      expect(classifyUpload(name, undefined, text), name).toEqual({ ok: true, format: 'txt' });
    }
    expect(classifyUpload('README', undefined, new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0, 0]))).toMatchObject({
      ok: false,
      message: expect.stringMatching(/its content is binary/),
    });
    for (const name of ['photo.png', 'sheet.xlsx', 'slides.pptx']) {
      expect(classifyUpload(name, undefined, text), name).toMatchObject({
        ok: false,
        message: expect.stringMatching(/^Unsupported file type/),
      });
    }
  });

  it('says a zip under another name is refused for its name', () => {
    const zip = new Uint8Array([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00]);
    expect(classifyUpload('report.txt', 'application/octet-stream', zip)).toEqual({
      ok: false,
      message:
        "'report.txt' is a zip archive, but its name says txt: a DOCX must be named .docx (or sent as Content-Type application/vnd.openxmlformats-officedocument.wordprocessingml.document); other archives are not supported",
    });
    expect(classifyUpload('archive.zip', 'application/zip', zip)).toMatchObject({
      ok: false,
      message: expect.stringMatching(/^Unsupported file type 'archive.zip': a zip archive is read only as a DOCX/),
    });
  });

  it('records the content type of the format parsed, the declared one only when it names that format', () => {
    expect(contentTypeOf('text/plain', 'pdf')).toBe('application/pdf');
    expect(contentTypeOf('application/octet-stream', 'md')).toBe('text/markdown');
    expect(contentTypeOf(undefined, 'docx')).toBe(
      'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
    );
    expect(contentTypeOf('text/plain', 'md')).toBe('text/markdown');
    expect(contentTypeOf('text/x-markdown', 'md')).toBe('text/x-markdown');
    expect(contentTypeOf('text/markdown; charset=utf-8', 'md')).toBe('text/markdown; charset=utf-8');
    expect(contentTypeOf('text/x-python', 'code')).toBe('text/x-python');
    expect(contentTypeOf('text/x-python', 'txt')).toBe('text/x-python');
    expect(contentTypeOf('text/csv', 'txt')).toBe('text/plain');
    expect(contentTypeOf('application/json', 'jsonl')).toBe('application/jsonl');
  });

  it('refuses unsupported and binary files', () => {
    expect(
      detectFormat('setup.exe', 'application/octet-stream', new Uint8Array([0x4d, 0x5a, 0x90, 0x00])),
    ).toBeUndefined();
    expect(
      detectFormat('photo.png', 'image/png', new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00])),
    ).toBeUndefined();
    expect(detectFormat('notes.txt', 'text/plain', new Uint8Array([0x68, 0x00, 0x69]))).toBeUndefined();
    // No extension and text content: plain text (see 'reads text with no extension at all').
    expect(detectFormat('upload', undefined, enc('text'))).toBe('txt');
  });
});
