/**
 * What an upload (POST) and a replace (PUT) take, multipart or JSON alike: one file, a name by the
 * same rules, a size limit on the document's content whichever way it comes, labels checked
 * against the bytes, and refusals that say what to send instead.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { sharedDocument } from '../support/fixtures.ts';
import { createCollection, uploadFile } from '../support/documents.ts';

const limit = 100_000;
let t: TestApp;
let existing: string;
beforeAll(async () => {
  // No worker: these tests are about what is accepted, not how it is ingested.
  t = await startTestApp({ config: { uploadLimitBytes: limit, ingestionConcurrency: 0 } });
  await createCollection(t, 'inputs');
  const first = await t.request('/api/v1/rag/collections/inputs/documents', {
    method: 'POST',
    json: { name: 'existing.txt', content: 'A document to replace.' },
  });
  existing = ((await first.json()) as { id: string }).id;
});
afterAll(() => t.close());

const unique = (label: string) => `${label} ${Math.random()}`;

/** Both routes that take a document: a new upload, and a replace of `existing`. */
const routes = () => [
  { method: 'POST', path: '/api/v1/rag/collections/inputs/documents' },
  { method: 'PUT', path: `/api/v1/rag/documents/${existing}` },
];

/** A multipart body written by hand, so the file name is exactly what is sent. */
function multipart(parts: { filename: string; type?: string; content: string }[]) {
  const boundary = 'RagportBoundary7';
  const body = parts
    .map(
      (p) =>
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${p.filename}"\r\n` +
        `Content-Type: ${p.type ?? 'text/plain'}\r\n\r\n${p.content}\r\n`,
    )
    .join('');
  return {
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    body: `${body}--${boundary}--\r\n`,
  };
}

describe('the file and its name', () => {
  it('two files in the field file are a validation failure: 400', async () => {
    for (const { method, path } of routes()) {
      const r = await t.request(path, {
        method,
        ...multipart([
          { filename: 'one.txt', content: unique('one') },
          { filename: 'two.txt', content: unique('two') },
        ]),
      });
      expect(r.status, method).toBe(400);
      expect(await r.json()).toEqual({ error: "Send exactly one file, in the field 'file'" });
    }
  });

  it('a multipart file name follows the rules of a JSON name: not blank, at most 500 characters', async () => {
    for (const { method, path } of routes()) {
      // A path is cut to its last segment by the multipart parser: "notes/" names nothing.
      for (const filename of ['', '   ', 'notes/']) {
        const r = await t.request(path, { method, ...multipart([{ filename, content: unique('nameless') }]) });
        expect(r.status, `${method} '${filename}'`).toBe(400);
        expect(await r.json()).toEqual({
          error: 'file: the file name must not be empty or blank (send a name such as notes.txt)',
        });
      }
      const long = await t.request(path, {
        method,
        ...multipart([{ filename: `${'m'.repeat(5_000)}.txt`, content: unique('long') }]),
      });
      expect(long.status).toBe(400);
      expect(await long.json()).toEqual({ error: 'file: the file name must be at most 500 characters' });
      for (const name of ['', '   ', `${'m'.repeat(5_000)}.txt`]) {
        const json = await t.request(path, { method, json: { name, content: unique('json') } });
        expect(json.status, `${method} JSON '${name.slice(0, 10)}'`).toBe(400);
      }
    }
    // What is taken is trimmed, the same way for both.
    const spaced = await t.request('/api/v1/rag/collections/inputs/documents', {
      method: 'POST',
      ...multipart([{ filename: '  spaced.txt  ', content: unique('spaced') }]),
    });
    expect(spaced.status).toBe(202);
    expect(await spaced.json()).toMatchObject({ name: 'spaced.txt' });
    const atLimit = await t.request('/api/v1/rag/collections/inputs/documents', {
      method: 'POST',
      ...multipart([{ filename: `${'m'.repeat(496)}.txt`, content: unique('at limit') }]),
    });
    expect(atLimit.status).toBe(202);
  });
});

describe('the size limit', () => {
  it("applies to a JSON upload's content, not to its escaped body", async () => {
    // 49,000 × "é" is 98,000 bytes of UTF-8, and 294,000 bytes of JSON as Python's json.dumps
    // escapes it (\u00e9); newlines and quotes double. All of it is under the limit of 100,000.
    const content = `${unique('escaped')}\n"${'é'.repeat(49_000)}"`;
    expect(Buffer.byteLength(content)).toBeLessThan(limit);
    const body = JSON.stringify({ name: 'escaped.txt', content }).replace(/é/g, '\\u00e9');
    expect(body.length).toBeGreaterThan(2.9 * limit);
    const send = (method: string, path: string) =>
      t.request(path, { method, headers: { 'content-type': 'application/json' }, body });
    const created = await send('POST', '/api/v1/rag/collections/inputs/documents');
    expect(created.status).toBe(202);
    const { id, size_bytes } = (await created.json()) as { id: string; size_bytes: number };
    expect(size_bytes).toBe(Buffer.byteLength(content));
    // Gone again, so that the replace below is not a duplicate of it.
    expect((await t.request(`/api/v1/rag/documents/${id}`, { method: 'DELETE' })).status).toBe(200);
    expect((await send('PUT', `/api/v1/rag/documents/${existing}`)).status).toBe(202);
  });

  it('content over the limit is a 413 stating it, as JSON and as a file alike', async () => {
    const over = `${unique('over')} ${'x'.repeat(limit)}`;
    const error = { error: `The document is larger than the upload limit of ${limit} bytes` };
    for (const { method, path } of routes()) {
      const json = await t.request(path, { method, json: { name: 'over.txt', content: over } });
      expect(json.status, method).toBe(413);
      expect(await json.json()).toEqual(error);
      const file = await t.request(path, { method, ...multipart([{ filename: 'over.txt', content: over }]) });
      expect(file.status, method).toBe(413);
      expect(await file.json()).toEqual(error);
    }
    // A JSON body too large to hold that much content, however escaped, is refused before it is read.
    const huge = JSON.stringify({ name: 'huge.txt', content: 'y'.repeat(3 * limit + 1024 * 1024) });
    const r = await t.request('/api/v1/rag/collections/inputs/documents', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: huge,
    });
    expect(r.status).toBe(413);
    expect(await r.json()).toEqual({
      error: `Request body is too large: a JSON upload may be at most ${3 * limit + 1024 * 1024} bytes, its content at most ${limit}`,
    });
  });
});

describe('media types', () => {
  it('a body that is neither multipart nor JSON is a 415 naming both', async () => {
    for (const { method, path } of routes()) {
      const r = await t.request(path, { method, headers: { 'content-type': 'text/plain' }, body: 'hello' });
      expect(r.status, method).toBe(415);
      expect(await r.json()).toEqual({
        error: 'Unsupported Content-Type; send multipart/form-data or application/json',
      });
    }
  });

  it('a PDF or DOCX content type counts as a label: text bytes under it are a 415', async () => {
    const pdf = await uploadFile(t, 'inputs', 'notes.txt', new TextEncoder().encode(unique('not a pdf')), {
      type: 'application/pdf',
    });
    expect(pdf.status).toBe(415);
    expect(await pdf.json()).toEqual({
      error:
        "'notes.txt' is labelled PDF (Content-Type application/pdf) but is not one: its content does not start with %PDF-",
    });
    const docx = await uploadFile(t, 'inputs', 'notes.txt', new TextEncoder().encode(unique('not a docx')), {
      type: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
    });
    expect(docx.status).toBe(415);
    expect(((await docx.json()) as { error: string }).error).toMatch(
      /^'notes.txt' is labelled DOCX \(Content-Type application\/vnd.openxmlformats-officedocument.wordprocessingml.document\) but is not one/,
    );
  });

  it('a DOCX named .txt is refused for its name, and says so', async () => {
    const r = await uploadFile(t, 'inputs', 'handbook.txt', sharedDocument('handbook-1p.docx'));
    expect(r.status).toBe(415);
    expect(await r.json()).toEqual({
      error:
        "'handbook.txt' is a zip archive, but its name says txt: a DOCX must be named .docx (or sent as Content-Type application/vnd.openxmlformats-officedocument.wordprocessingml.document); other archives are not supported",
    });
  });

  it('content_type is the type of the format parsed, the label kept only when it names that format', async () => {
    const stored = async (response: Response) => {
      expect(response.status).toBe(202);
      return ((await response.json()) as { content_type: string }).content_type;
    };
    const text = (label: string) => new TextEncoder().encode(unique(label));
    // A PDF sent as text/plain is read as a PDF.
    expect(
      await stored(await uploadFile(t, 'inputs', 'scan.txt', sharedDocument('crazyones.pdf'), { type: 'text/plain' })),
    ).toBe('application/pdf');
    // Markdown by its name, whatever text flavour the client said.
    expect(await stored(await uploadFile(t, 'inputs', 'notes.md', text('# md'), { type: 'text/plain' }))).toBe(
      'text/markdown',
    );
    expect(await stored(await uploadFile(t, 'inputs', 'notes.md', text('# md'), { type: 'text/x-markdown' }))).toBe(
      'text/x-markdown',
    );
    // Text and source code are read alike: a text/* label of theirs is kept.
    expect(await stored(await uploadFile(t, 'inputs', 'main.py', text('print(1)'), { type: 'text/x-python' }))).toBe(
      'text/x-python',
    );
    expect(await stored(await uploadFile(t, 'inputs', 'data.txt', text('a,b'), { type: 'text/csv' }))).toBe(
      'text/plain',
    );
  });
});
