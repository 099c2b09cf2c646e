import { strToU8 } from 'fflate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { parserPids } from '../support/processes.ts';
import { until } from '../support/poll.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection, uploadFile, waitForDocument, type DocumentBody } from '../support/documents.ts';
import { documentXml, enc, makeDocx, pdfDeeplyNested, pdfSlowPages, pdfStreamBomb } from '../support/files.ts';

/**
 * Hostile files through the real upload endpoint: each ends as a clear 4xx or as a `failed`
 * document with a clear error, while the server keeps answering and its memory stays bounded.
 * Every file is generated here.
 */

const limits = { timeoutMs: 10_000, memoryMb: 512 };
const uploadLimit = 50 * 1024 * 1024;

let t: TestApp;
let peakRss = 0;
let sampler: NodeJS.Timeout;
beforeAll(async () => {
  t = await startTestApp({
    config: { uploadLimitBytes: uploadLimit, parsing: { concurrency: 2, ...limits } },
  });
  await createCollection(t, 'hostile');
  sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 100);
});
afterAll(async () => {
  clearInterval(sampler);
  await t.close();
});

const upload = async (name: string, bytes: Uint8Array, type?: string, app = t): Promise<Response> =>
  uploadFile(app, 'hostile', name, bytes, type === undefined ? {} : { type });

/** Uploads a file the API accepts (202) and returns the document's id. */
async function accepted(name: string, bytes: Uint8Array, type?: string, app = t): Promise<string> {
  const response = await upload(name, bytes, type, app);
  expect(response.status, await response.clone().text()).toBe(202);
  return ((await response.json()) as { id: string }).id;
}

const document = async (id: string): Promise<DocumentBody> =>
  (await t.request(`/api/v1/rag/documents/${id}`)).json() as Promise<DocumentBody>;

async function failsWith(id: string, error: RegExp | string, timeoutMs = 60_000, app = t): Promise<void> {
  const doc = await waitForDocument(app, id, undefined, timeoutMs);
  expect(doc.status).toBe('failed');
  if (typeof error === 'string') expect(doc.error).toBe(error);
  else expect(doc.error).toMatch(error);
  expect(doc.chunk_count).toBe(0);
}

const attempts = async (id: string, app = t) =>
  (
    await queryRows<{ attempts: number }>(
      app.database.db,
      sql`select attempts from ingestion_jobs where document_id = ${id}`,
    )
  )[0]?.attempts;

/** The server answers while a document is still being worked on: it does not wait for the parse. */
async function answersDuring(id: string, phase: 'processing' | 'pending or processing' = 'processing') {
  const inPhase = (status: string) =>
    phase === 'processing' ? status === 'processing' : status !== 'processed' && status !== 'failed';
  await until(`document ${id} ${phase}`, async () => inPhase((await document(id)).status), { intervalMs: 20 });
  for (let i = 0; i < 3; i += 1) {
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
    expect((await t.request('/api/v1/rag/collections/hostile')).status).toBe(200);
  }
  expect(inPhase((await document(id)).status)).toBe(true);
}

describe('refused at upload with a clear 4xx', () => {
  it('a .pdf that is really HTML is a 415 that says so', async () => {
    const html = enc('<!doctype html><html><head><title>x</title></head><body><p>Not a PDF.</p></body></html>');
    for (const type of ['application/pdf', 'application/octet-stream']) {
      const response = await upload('report.pdf', html, type);
      expect(response.status).toBe(415);
      expect(await response.json()).toEqual({
        error: "'report.pdf' is labelled PDF but is not one: its content does not start with %PDF-",
      });
    }
  });

  it('a .docx that is not a zip is a 415 that says so', async () => {
    const response = await upload('letter.docx', enc('Dear reader, this is plain text.'));
    expect(response.status).toBe(415);
    expect(await response.json()).toEqual({
      error: "'letter.docx' is labelled DOCX but is not one: its content is not a zip archive",
    });
    const binary = await upload('letter.docx', new Uint8Array([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1, 0]));
    expect(binary.status).toBe(415);
  });

  it('binary content labelled as text is a 415', async () => {
    const response = await upload(
      'notes.txt',
      new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0, 0, 0]),
      'text/plain',
    );
    expect(response.status).toBe(415);
    expect(((await response.json()) as { error: string }).error).toMatch(
      /^Unsupported file type 'notes.txt': its content is binary/,
    );
  });

  it('a file over the upload limit is a 413, whatever it claims to be', async () => {
    const response = await upload('huge.txt', new Uint8Array(uploadLimit + 1).fill(0x61));
    expect(response.status).toBe(413);
    expect(typeof ((await response.json()) as { error: unknown }).error).toBe('string');
  }, 120_000);
});

describe('accepted, then failed with a clear error', () => {
  it('a zip bomb inside a docx fails before anything is inflated', async () => {
    // 64 MB of spaces in word/document.xml deflate to about 64 kB.
    const bomb = makeDocx(strToU8(documentXml(' '.repeat(64 * 1024 * 1024))));
    expect(bomb.length).toBeLessThan(256 * 1024);
    await failsWith(await accepted('bomb.docx', bomb), 'DOCX expands to too much data (a possible zip bomb)');
  });

  it('a PDF whose content stream inflates to 1 GB is stopped at the memory limit', async () => {
    const bomb = pdfStreamBomb(1024);
    expect(bomb.length).toBeLessThan(2 * 1024 * 1024);
    // A server whose time limit cannot come first: inflating towards the limit takes ~2.5 s on a
    // quiet machine and over 10 s (this file's time limit) on a loaded one.
    const patient = await startTestApp({
      config: {
        uploadLimitBytes: uploadLimit,
        parsing: { concurrency: 1, timeoutMs: 120_000, memoryMb: limits.memoryMb },
      },
    });
    try {
      await createCollection(patient, 'hostile');
      const id = await accepted('bomb.pdf', bomb, undefined, patient);
      await failsWith(
        id,
        `Parsing stopped: reading the file needed more than ${limits.memoryMb} MB of memory (the server's limit); it is too large or too complex, or a decompression bomb`,
        150_000,
        patient,
      );
      expect(await attempts(id, patient)).toBe(1);
    } finally {
      await patient.close();
    }
  }, 180_000);

  it('a PDF with the largest page count read is stopped at the time limit, and the server answers meanwhile', async () => {
    const id = await accepted('pages.pdf', pdfSlowPages());
    await answersDuring(id);
    await failsWith(
      id,
      `Parsing stopped after ${limits.timeoutMs / 1000} s (the server's time limit): the file is too large or too complex to read`,
    );
    // A time limit is the file's doing: not retried.
    expect(await attempts(id)).toBe(1);
  }, 60_000);

  it('a PDF nested 100,000 levels deep fails as unreadable', async () => {
    await failsWith(await accepted('nested.pdf', pdfDeeplyNested(100_000)), /^PDF could not be read: /);
  });

  it('JSON nested 100,000 levels deep fails as too deep, as a file and as JSON content', async () => {
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    await failsWith(await accepted('deep.json', enc(deep)), 'JSON is nested too deeply (more than 100 levels)');
    const response = await t.request('/api/v1/rag/collections/hostile/documents', {
      method: 'POST',
      json: { name: 'deep.jsonl', content: `{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}` },
    });
    expect(response.status).toBe(202);
    await failsWith(((await response.json()) as { id: string }).id, 'JSON is nested too deeply (more than 100 levels)');
  });

  it.each([
    ['latin1.txt', 'text/plain'],
    ['latin1.md', 'text/markdown'],
    ['latin1.csv', 'text/csv'],
  ])('mostly invalid UTF-8 in %s fails asking for UTF-8', async (name, type) => {
    // Latin-1 text: every accented letter is an invalid UTF-8 byte.
    const bytes = new Uint8Array(Buffer.from(`${name}: élève, café, déjà, naïve, façade; `.repeat(200), 'latin1'));
    await failsWith(
      await accepted(name, bytes, type),
      /^The file is not UTF-8 text: \d+ of its \d+ characters are invalid byte sequences; save it as UTF-8 and upload it again$/,
    );
  });

  it('a parser process killed mid-parse is retried; the retry hits the time limit and is final', async () => {
    const id = await accepted('crash.pdf', pdfSlowPages(2000, 4001));
    await answersDuring(id);
    const [pid] = parserPids();
    expect(pid).toBeGreaterThan(0);
    process.kill(pid as number, 'SIGKILL');
    await failsWith(id, /^Parsing stopped after 10 s/, 90_000);
    expect(await attempts(id)).toBe(2);
  }, 120_000);
});

describe('accepted and processed, bounded', () => {
  it('a 50 MB line without a space or newline: text capped, chunks of a sane size', async () => {
    const id = await accepted('line.txt', new Uint8Array(uploadLimit - 1024).fill(0x78));
    await answersDuring(id, 'pending or processing');
    const doc = await waitForDocument(t, id, undefined, 180_000);
    expect(doc).toMatchObject({ status: 'processed', error: null });
    const [sizes] = await queryRows<{ chunks: number; longest: number; total: number }>(
      t.database.db,
      sql`select count(*)::int as chunks, max(length(content))::int as longest, sum(length(content))::bigint::float8 as total
          from chunks where document_id = ${id}`,
    );
    expect(sizes?.chunks).toBe(doc.chunk_count);
    expect(sizes?.longest).toBeLessThanOrEqual(200 * 32);
    expect(sizes?.total).toBeLessThanOrEqual(10_000_000);
    expect(sizes?.total).toBeGreaterThan(9_000_000);
  }, 240_000);

  it('a long line of words with no sentence end is cut by the token budget', async () => {
    const words = 'retrieval augmented generation needs careful chunking of very long lines ';
    const id = await accepted('words.txt', enc(words.repeat(2_000)));
    const doc = await waitForDocument(t, id, undefined, 180_000);
    expect(doc.status).toBe('processed');
    const [tokens] = await queryRows<{ most: number }>(
      t.database.db,
      sql`select max(token_count)::int as most from chunks where document_id = ${id}`,
    );
    expect(tokens?.most).toBeLessThanOrEqual(200);
    expect(doc.chunk_count).toBeGreaterThan(100);
  }, 240_000);
});

describe('afterwards', () => {
  it('the server is healthy and its memory bounded', async () => {
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
    // The test process is the server here (model, database and all). Generous: what matters is
    // that gigabytes of inflated streams never landed in it. After this file's large uploads the
    // process stood at 2,081 MB in a CI run on 2 cores (the embedded database's memory does not
    // shrink), over the 2,048 this said before; the 1 GB bomb landing would pass 3 GB.
    expect(peakRss / 2 ** 20).toBeLessThan(3072);
    expect(process.memoryUsage().rss / 2 ** 20).toBeLessThan(3072);
  });
});
