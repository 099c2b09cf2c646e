import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection, uploadFile, waitForDocument } from '../support/documents.ts';
import { sharedDocument } from '../support/fixtures.ts';

const flat = (text: string) => text.replace(/\s+/g, ' ');

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ config: { uploadLimitBytes: 400 * 1024 } });
  await createCollection(t, 'docs');
});
afterAll(async () => {
  await t.close();
});

const chunkTexts = async (documentId: string) =>
  (
    await queryRows<{ content: string; position: number }>(
      t.database.db,
      sql`select content, position from chunks where document_id = ${documentId} order by position`,
    )
  ).map((r) => r.content);

describe('uploading the shared documents', () => {
  const cases: [string, string][] = [
    ['multi-column-2p.pdf', 'Dense Passage Retrieval for Open-Domain Question Answering'],
    ['layout-parser-paper-fast.pdf', 'Recent advances in document image analysis (DIA)'],
    ['GeoBase_NHNC1_Data_Model_UML_EN.pdf', 'National Hydro Network'],
    ['crazyones.pdf', 'The round pegs in the square holes'],
    ['korean-text-with-tables.pdf', '빅포인트의 유효기간은 5년으로'],
    ['embedded-cmap-cidfont.pdf', 'This text uses an embedded CMap'],
    ['handbook-1p.docx', 'The United States Trustee appoints and supervises standing trustees'],
    ['docx-tables.docx', 'Header Col 1 | Header Col 2'],
    ['ideas-page.html', 'The way to get new ideas is to notice anomalies'],
    ['example-with-scripts.html', 'Belarusian forces remain unlikely to attack Ukraine'],
    ['table-multi-row-column-cells-actual.csv', 'Disability Category: Low Vision'],
    ['extract-text.md', 'Extract Text from a PDF'],
  ];

  it.each(cases)('%s is processed and its text is searchable in its chunks', async (name, phrase) => {
    const bytes = sharedDocument(name);
    const response = await uploadFile(t, 'docs', name, bytes, { metadata: { source: 'shared' } });
    expect(response.status).toBe(202);
    const created = (await response.json()) as Record<string, unknown>;
    expect(created).toMatchObject({
      name,
      collection_name: 'docs',
      status: 'pending',
      chunk_count: 0,
      size_bytes: bytes.length,
      metadata: { source: 'shared' },
      error: null,
    });
    const doc = await waitForDocument(t, created.id as string);
    expect(doc.error).toBeNull();
    expect(doc.status).toBe('processed');
    expect(doc.chunk_count).toBeGreaterThan(0);
    const texts = await chunkTexts(doc.id);
    expect(texts).toHaveLength(doc.chunk_count);
    expect(texts.some((c) => flat(c).includes(phrase))).toBe(true);
  });
});

describe('document rules', () => {
  it('JSON text upload, detail, update, delete with exact messages', async () => {
    const response = await t.request('/api/v1/rag/collections/docs/documents', {
      method: 'POST',
      json: {
        name: 'notes.md',
        content: '# Notes\n\nRagport keeps originals.',
        description: 'd',
        metadata: { team: 'x' },
      },
    });
    expect(response.status).toBe(202);
    const { id } = (await response.json()) as { id: string };
    const doc = await waitForDocument(t, id);
    expect(doc).toMatchObject({ name: 'notes.md', collection_name: 'docs', description: 'd', metadata: { team: 'x' } });

    const put = await t.request(`/api/v1/rag/documents/${id}`, {
      method: 'PUT',
      json: { metadata: { team: 'y', year: 2024 } },
    });
    expect(put.status).toBe(200);
    expect(await put.json()).toEqual({ message: 'Document updated' });
    expect(((await (await t.request(`/api/v1/rag/documents/${id}`)).json()) as { metadata: unknown }).metadata).toEqual(
      {
        team: 'y',
        year: 2024,
      },
    );

    const del = await t.request(`/api/v1/rag/documents/${id}`, { method: 'DELETE' });
    expect(await del.json()).toEqual({ message: 'Document deleted' });
    expect(await chunkTexts(id)).toEqual([]);
    for (const method of ['GET', 'PUT', 'DELETE'] as const) {
      const gone = await t.request(`/api/v1/rag/documents/${id}`, {
        method,
        ...(method === 'PUT' ? { json: { description: 'x' } } : {}),
      });
      expect(gone.status).toBe(404);
      expect(await gone.json()).toEqual({ error: 'Document not found' });
    }
  });

  it('text files get a real content type, whether sent as octet-stream, unlabelled or as JSON with a name', async () => {
    const unique = () => `# Notes ${Math.random()}\n\nSome text.`;
    const stored = async (response: Response) => {
      expect(response.status).toBe(202);
      return ((await response.json()) as { content_type: string }).content_type;
    };
    const bytes = () => new TextEncoder().encode(unique());
    // curl -F file=@notes.md sends application/octet-stream.
    expect(await stored(await uploadFile(t, 'docs', 'notes.md', bytes()))).toBe('text/markdown');
    expect(await stored(await uploadFile(t, 'docs', 'notes.txt', bytes()))).toBe('text/plain');
    expect(await stored(await uploadFile(t, 'docs', 'notes.md', bytes(), { type: 'text/x-markdown' }))).toBe(
      'text/x-markdown',
    );
    const json = (name: string) =>
      t.request('/api/v1/rag/collections/docs/documents', { method: 'POST', json: { name, content: unique() } });
    expect(await stored(await json('readme.md'))).toBe('text/markdown');
    expect(await stored(await json('plain.txt'))).toBe('text/plain');
  });

  it('a byte-identical re-upload is a 409 naming the existing document', async () => {
    const content = `Unique content ${Math.random()}`;
    const first = await t.request('/api/v1/rag/collections/docs/documents', {
      method: 'POST',
      json: { name: 'a.txt', content },
    });
    const { id } = (await first.json()) as { id: string };
    const again = await uploadFile(t, 'docs', 'renamed.txt', new TextEncoder().encode(content), { type: 'text/plain' });
    expect(again.status).toBe(409);
    expect(await again.json()).toEqual({ error: 'Document already exists', document_id: id });
  });

  it('unsupported types are 415, oversize files 413, malformed requests 400', async () => {
    const exe = await uploadFile(t, 'docs', 'tool.exe', new Uint8Array([0x4d, 0x5a, 1, 2, 3]));
    expect(exe.status).toBe(415);
    expect(typeof ((await exe.json()) as { error: unknown }).error).toBe('string');

    const big = await uploadFile(t, 'docs', 'big.txt', new Uint8Array(500 * 1024).fill(0x61));
    expect(big.status).toBe(413);

    const noFile = new FormData();
    noFile.set('description', 'no file');
    const missing = await t.request('/api/v1/rag/collections/docs/documents', { method: 'POST', body: noFile });
    expect(missing.status).toBe(400);

    const badMeta = await uploadFile(t, 'docs', 'm.txt', new TextEncoder().encode('meta'), { type: 'text/plain' });
    expect(badMeta.status).toBe(202);
    const form = new FormData();
    form.set('file', new Blob(['other']), 'x.txt');
    form.set('metadata', '[1, 2');
    const bad = await t.request('/api/v1/rag/collections/docs/documents', { method: 'POST', body: form });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: 'metadata: metadata must be a JSON object' });
    const deepForm = new FormData();
    deepForm.set('file', new Blob(['deep']), 'deep.txt');
    deepForm.set('metadata', `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`);
    const deep = await t.request('/api/v1/rag/collections/docs/documents', { method: 'POST', body: deepForm });
    expect(deep.status).toBe(400);
    expect(await deep.json()).toEqual({ error: 'metadata: metadata is nested too deeply (more than 100 levels)' });

    const noContent = await t.request('/api/v1/rag/collections/docs/documents', {
      method: 'POST',
      json: { name: 'x' },
    });
    expect(noContent.status).toBe(400);
  });

  it('a multipart body the parser cannot read is a 400, never a 500', async () => {
    const upload = (headers: Record<string, string>, body: string) =>
      t.request('/api/v1/rag/collections/docs/documents', { method: 'POST', headers, body });
    const noBoundary = await upload({ 'content-type': 'multipart/form-data' }, '');
    expect(noBoundary.status).toBe(400);
    expect(await noBoundary.json()).toEqual({ error: 'Malformed multipart body: Multipart: Boundary not found' });
    const truncated = await upload(
      { 'content-type': 'multipart/form-data; boundary=XyZ' },
      '--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\nhalf a fi',
    );
    expect(truncated.status).toBe(400);
    expect(((await truncated.json()) as { error: string }).error).toMatch(/^Malformed multipart body: /);
    const crowded = new FormData();
    crowded.set('file', new Blob(['crowded']), 'crowded.txt');
    for (let i = 0; i < 11; i += 1) crowded.set(`field${i}`, 'x');
    const tooMany = await t.request('/api/v1/rag/collections/docs/documents', { method: 'POST', body: crowded });
    expect(tooMany.status).toBe(413);
    expect(await tooMany.json()).toEqual({ error: 'Too many multipart fields (at most 10)' });
  });

  it('a malformed PDF ends as failed with a readable error', async () => {
    const broken = new TextEncoder().encode('%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage without xref');
    const response = await uploadFile(t, 'docs', 'broken.pdf', broken, { type: 'application/pdf' });
    expect(response.status).toBe(202);
    const doc = await waitForDocument(t, ((await response.json()) as { id: string }).id);
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatch(/PDF/);
    expect(doc.chunk_count).toBe(0);
  });

  it('lists with pagination: a short page is the last one', async () => {
    await createCollection(t, 'paged');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await t.request('/api/v1/rag/collections/paged/documents', {
        method: 'POST',
        json: { name: `p${i}.txt`, content: `page test ${i}` },
      });
      ids.push(((await r.json()) as { id: string }).id);
    }
    const page = async (n: number) =>
      (await (await t.request(`/api/v1/rag/collections/paged/documents?page=${n}&page_size=2`)).json()) as {
        documents: { id: string; name: string }[];
        page: number;
        page_size: number;
        total: number;
      };
    const [p1, p2, p3] = [await page(1), await page(2), await page(3)];
    expect([p1.documents.length, p2.documents.length, p3.documents.length]).toEqual([2, 2, 1]);
    expect(p1).toMatchObject({ page: 1, page_size: 2, total: 5 });
    expect(new Set([...p1.documents, ...p2.documents, ...p3.documents].map((d) => d.id))).toEqual(new Set(ids));
    const defaults = (await (await t.request('/api/v1/rag/collections/paged/documents')).json()) as {
      page_size: number;
      documents: { id: string; created_at: string }[];
    };
    expect(defaults.page_size).toBe(20);
    // Newest first, and the pages are that order cut in pieces.
    const times = defaults.documents.map((d) => Date.parse(d.created_at));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    expect([...p1.documents, ...p2.documents, ...p3.documents].map((d) => d.id)).toEqual(
      defaults.documents.map((d) => d.id),
    );
    expect((await t.request('/api/v1/rag/collections/paged/documents?page_size=101')).status).toBe(400);
    expect((await t.request('/api/v1/rag/collections/paged/documents?page=0')).status).toBe(400);

    // Each item says what its record says of its state: status, error and progress.
    const record = (await (await t.request(`/api/v1/rag/documents/${ids[0]}`)).json()) as Record<string, unknown>;
    const listed = (await page(3)).documents[0] as unknown as Record<string, unknown>;
    expect(listed).toMatchObject({ id: ids[0], status: expect.any(String) });
    expect(Object.keys(listed)).toEqual(expect.arrayContaining(['status', 'error', 'progress']));
    if (record.status === listed.status)
      expect([listed.error, listed.progress]).toEqual([record.error, record.progress]);
  });
});
