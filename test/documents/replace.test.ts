/**
 * The document lifecycle after upload: replace in place (the previous version searchable until the
 * new one commits), supersede, progress while processing, and cancel. Runs on PGlite, and on the
 * PostgreSQL server with TEST_DATABASE_URL, where searches and the worker's commit really overlap.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startTestApp } from '../support/app.ts';
import { until } from '../support/poll.ts';
import { createCollection, uploadFile, waitForDocument, type DocumentBody } from '../support/documents.ts';

// Small embedding batches: many progress reports, and a cancel lands mid-embedding.
const t = await startTestApp({ config: { ingestionConcurrency: 1, ingestionEmbedBatch: 4 } });
afterAll(() => t.close());

interface Hit {
  content: string;
  metadata: Record<string, unknown>;
}

/** `count` paragraphs, each naming `marker`, distinct enough to make one chunk or more each. */
function versionText(marker: string, count: number): string {
  const topics = ['glaciers', 'orchards', 'harbours', 'observatories', 'libraries', 'railways', 'vineyards', 'bridges'];
  return Array.from(
    { length: count },
    (_, i) =>
      `Section ${i} of the ${marker} report. The ${marker} survey describes ${topics[i % topics.length]} ` +
      `and their upkeep in district ${i}: inspections, budgets, staffing and the ${marker} schedule for next year. ` +
      `Every paragraph repeats the word ${marker} so that a search can tell the versions apart. `.repeat(4),
  ).join('\n\n');
}

async function search(collection: string, query: string, mode = 'hybrid'): Promise<Hit[]> {
  const r = await t.request('/api/v1/agent/tool-calling', {
    method: 'POST',
    json: { tool_name: 'rag_search', parameters: { query, collection, mode, top_k: 20, similarity_threshold: -1 } },
  });
  expect(r.status).toBe(200);
  return ((await r.json()) as { results: Hit[] }).results;
}

async function getDocument(id: string): Promise<DocumentBody> {
  const r = await t.request(`/api/v1/rag/documents/${id}`);
  expect(r.status).toBe(200);
  return (await r.json()) as DocumentBody;
}

async function upload(collection: string, name: string, content: string): Promise<DocumentBody> {
  const r = await t.request(`/api/v1/rag/collections/${collection}/documents`, {
    method: 'POST',
    json: { name, content },
  });
  expect(r.status).toBe(202);
  return (await r.json()) as DocumentBody;
}

async function replace(id: string, name: string, content: string): Promise<Response> {
  return t.request(`/api/v1/rag/documents/${id}`, { method: 'PUT', json: { name, content } });
}

/** Polls until `accept` holds for the document, returning every state seen on the way. */
async function watch(id: string, accept: (d: DocumentBody) => boolean, timeoutMs = 120_000) {
  const seen: DocumentBody[] = [];
  return until(
    `document ${id} to reach the state`,
    async () => {
      const doc = await getDocument(id);
      seen.push(doc);
      return accept(doc) ? seen : undefined;
    },
    { timeoutMs, intervalMs: 25, detail: () => `last ${JSON.stringify(seen.at(-1))}` },
  );
}

describe('replacing a document in place', () => {
  it('keeps one version searchable at every moment: never none, never both', async () => {
    await createCollection(t, 'replace_loop');
    const v1 = await upload('replace_loop', 'report.txt', versionText('aurora', 12));
    expect((await waitForDocument(t, v1.id)).status).toBe('processed');
    const before = await getDocument(v1.id);
    expect(before).toMatchObject({ version: 1, replaced_at: null, progress: null });

    const r = await replace(v1.id, 'report-v2.txt', versionText('nebula', 12));
    expect(r.status).toBe(202);
    const queued = (await r.json()) as DocumentBody;
    expect(queued).toMatchObject({ id: v1.id, status: 'pending', version: 1, message: 'Document replacement queued' });

    // Search in a loop while the new version ingests and commits, in every mode: keyword search
    // reads its candidates and scores them in two statements, and a commit may fall between them.
    const observed: ('aurora' | 'nebula')[] = [];
    const modes = ['hybrid', 'keyword', 'dense'];
    let done = false;
    const loop = (async () => {
      while (!done) {
        const mode = modes[observed.length % modes.length];
        const hits = await search('replace_loop', 'survey report schedule inspections', mode);
        expect(hits.length).toBeGreaterThan(0);
        const versions = new Set(hits.map((h) => (h.content.includes('aurora') ? 'aurora' : 'nebula')));
        expect(hits.every((h) => h.content.includes('aurora') !== h.content.includes('nebula'))).toBe(true);
        expect(versions.size).toBe(1);
        observed.push([...versions][0] as 'aurora' | 'nebula');
      }
    })();
    const after = await waitForDocument(t, v1.id);
    // A few more searches after the commit.
    const settled = observed.length;
    while (observed.length < settled + 3) await new Promise((r) => setTimeout(r, 20));
    done = true;
    await loop;

    expect(after.status).toBe('processed');
    expect(after).toMatchObject({ id: v1.id, version: 2, name: 'report-v2.txt' });
    expect(typeof after.replaced_at).toBe('string');
    expect(observed[0]).toBe('aurora');
    expect(observed.at(-1)).toBe('nebula');
    // Once the new version showed, the old one never came back.
    expect(observed.slice(observed.indexOf('nebula'))).not.toContain('aurora');
    const hits = await search('replace_loop', 'aurora');
    expect(hits.some((h) => h.content.includes('aurora'))).toBe(false);
  }, 180_000);

  it('accepts a multipart file, as an upload does, and keeps dedup: same content is a 409', async () => {
    await createCollection(t, 'replace_dedup');
    const a = await upload('replace_dedup', 'a.txt', 'Alpha document about lighthouses and their keepers.');
    const b = await upload('replace_dedup', 'b.txt', 'Beta document about beekeeping in mountain villages.');
    await waitForDocument(t, a.id);
    await waitForDocument(t, b.id);

    // Content another document holds: refused with that document's id.
    const taken = await replace(a.id, 'a.txt', 'Beta document about beekeeping in mountain villages.');
    expect(taken.status).toBe(409);
    expect(await taken.json()).toEqual({ error: 'Document already exists', document_id: b.id });
    // Its own current content: nothing to replace.
    const same = await replace(a.id, 'a.txt', 'Alpha document about lighthouses and their keepers.');
    expect(same.status).toBe(409);

    const form = new FormData();
    const html = '<html><body><h1>Gamma</h1><p>Gamma document about tidal power stations.</p></body></html>';
    form.set('file', new Blob([html], { type: 'text/html' }), 'gamma.html');
    form.set('metadata', JSON.stringify({ team: 'energy' }));
    const r = await t.request(`/api/v1/rag/documents/${a.id}`, { method: 'PUT', body: form });
    expect(r.status).toBe(202);
    // While it is pending, the same content cannot be uploaded as a new document either.
    const dup = await uploadFile(t, 'replace_dedup', 'copy.html', new TextEncoder().encode(html), {
      type: 'text/html',
    });
    expect(dup.status).toBe(409);
    expect(await dup.json()).toMatchObject({ document_id: a.id });

    const done = await waitForDocument(t, a.id);
    expect(done).toMatchObject({ status: 'processed', version: 2, name: 'gamma.html', metadata: { team: 'energy' } });
    const hits = await search('replace_dedup', 'tidal power');
    expect(hits.some((h) => h.content.includes('Gamma document about tidal power'))).toBe(true);
    expect(hits.some((h) => h.content.includes('lighthouses'))).toBe(false);

    // Description-and-metadata updates keep their meaning.
    const patch = await t.request(`/api/v1/rag/documents/${a.id}`, { method: 'PUT', json: { description: 'd' } });
    expect(patch.status).toBe(200);
    expect(await patch.json()).toEqual({ message: 'Document updated' });
    expect(await getDocument(a.id)).toMatchObject({ description: 'd', version: 2 });
    const unknown = await replace('doc_missing', 'x.txt', 'nothing here');
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: 'Document not found' });

    // Bad new content is refused as an upload's would be, and the document is untouched.
    const binary = new FormData();
    binary.set('file', new Blob([new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0])]), 'tool.bin');
    const refused = await t.request(`/api/v1/rag/documents/${a.id}`, { method: 'PUT', body: binary });
    expect(refused.status).toBe(415);
    const broken = await t.request(`/api/v1/rag/documents/${a.id}`, {
      method: 'PUT',
      headers: { 'content-type': 'multipart/form-data; boundary=x' },
      body: '--x\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\nunterminated',
    });
    expect(broken.status).toBe(400);
    const empty = await t.request(`/api/v1/rag/documents/${a.id}`, {
      method: 'PUT',
      json: { name: 'e.txt', content: '' },
    });
    expect(empty.status).toBe(400);
    expect(await getDocument(a.id)).toMatchObject({ status: 'processed', version: 2, name: 'gamma.html' });
  }, 120_000);

  it('supersedes a replace still processing: the latest content wins, the earlier never commits', async () => {
    await createCollection(t, 'replace_supersede');
    const doc = await upload('replace_supersede', 's.txt', versionText('granite', 4));
    await waitForDocument(t, doc.id);
    expect((await replace(doc.id, 's.txt', versionText('basalt', 60))).status).toBe(202);
    // The second replace arrives while the first is processing (or still queued).
    await watch(doc.id, (d) => d.status === 'processing');
    expect((await replace(doc.id, 's.txt', versionText('marble', 3))).status).toBe(202);
    const done = await waitForDocument(t, doc.id);
    expect(done).toMatchObject({ status: 'processed', version: 3 });
    const hits = await search('replace_supersede', 'report survey');
    expect(hits.length).toBeGreaterThan(0);
    expect(hits.every((h) => h.content.includes('marble'))).toBe(true);
    // The superseded version never showed up, not even later.
    await new Promise((r) => setTimeout(r, 500));
    expect((await search('replace_supersede', 'basalt')).some((h) => h.content.includes('basalt'))).toBe(false);
    expect((await getDocument(doc.id)).version).toBe(3);
  }, 180_000);
});

describe('a description or metadata PUT while a replace processes', () => {
  it('is kept when the replace commits: the later write wins', async () => {
    await createCollection(t, 'replace_meta');
    const created = await t.request('/api/v1/rag/collections/replace_meta/documents', {
      method: 'POST',
      json: { name: 'm.txt', content: versionText('slate', 2), description: 'D0', metadata: { v: 'M0' } },
    });
    const doc = (await created.json()) as DocumentBody;
    await waitForDocument(t, doc.id);
    const replaced = await t.request(`/api/v1/rag/documents/${doc.id}`, {
      method: 'PUT',
      json: { name: 'm.txt', content: versionText('quartz', 60), description: 'D1', metadata: { v: 'M1' } },
    });
    expect(replaced.status).toBe(202);
    await watch(doc.id, (d) => d.status === 'processing');
    const patched = await t.request(`/api/v1/rag/documents/${doc.id}`, {
      method: 'PUT',
      json: { description: 'D2', metadata: { v: 'M2' } },
    });
    expect(patched.status).toBe(200);
    // Before, the replace put back D1 and M1 when it committed.
    const done = await waitForDocument(t, doc.id);
    expect(done).toMatchObject({ status: 'processed', description: 'D2', metadata: { v: 'M2' } });
    const hits = await search('replace_meta', 'quartz report');
    expect(hits.length).toBeGreaterThan(0);
    expect(hits.every((h) => h.metadata.v === 'M2')).toBe(true);
  }, 180_000);
});

describe('concurrent replaces of one document', () => {
  // Ten at once, three times over: with the worker claiming each new version as it commits, this
  // once ended in a lock cycle PostgreSQL broke by failing requests (500) in most rounds.
  it('all are accepted, and exactly one of their versions ends searchable', async () => {
    await createCollection(t, 'replace_race');
    const doc = await upload('replace_race', 'r.txt', versionText('slate', 2));
    await waitForDocument(t, doc.id);
    let version = 1;
    for (const round of ['a', 'b', 'c']) {
      const markers = [
        'amber',
        'birch',
        'cedar',
        'dahlia',
        'ember',
        'fennel',
        'garnet',
        'hazel',
        'indigo',
        'juniper',
      ].map((m) => `${m}${round}`);
      const answers = await Promise.all(markers.map((m) => replace(doc.id, 'r.txt', versionText(m, 2))));
      expect(answers.map((r) => r.status)).toEqual(markers.map(() => 202));
      version += markers.length;
      const done = await waitForDocument(t, doc.id);
      expect(done).toMatchObject({ status: 'processed', version });
      const hits = await search('replace_race', 'survey report');
      const found = new Set(hits.flatMap((h) => markers.filter((m) => h.content.includes(m))));
      expect(found.size).toBe(1);
      const bodies = await Promise.all(answers.map((r) => r.json() as Promise<DocumentBody>));
      expect(bodies.every((b) => b.id === doc.id)).toBe(true);
    }
  }, 180_000);
});

describe('progress and cancel', () => {
  it('shows the stage and the chunks embedded while processing', async () => {
    await createCollection(t, 'progress');
    const doc = await upload('progress', 'big.txt', versionText('cobalt', 80));
    // A second document waits behind it (one job at a time): cancelled while pending, it never runs.
    const queued = await upload('progress', 'small.txt', 'A short note about quartz.');
    const cancelled = await t.request(`/api/v1/rag/documents/${queued.id}/cancel`, { method: 'POST' });
    expect(cancelled.status).toBe(200);
    expect(await cancelled.json()).toMatchObject({ status: 'cancelled', progress: null });
    const seen = await watch(doc.id, (d) => d.status === 'processed' || d.status === 'failed');
    expect(seen.at(-1)).toMatchObject({ status: 'processed', progress: null });
    const progress = seen
      .filter((d) => d.status === 'processing')
      .map((d) => d.progress as { stage: string; chunks_embedded: number | null; chunks_total: number | null });
    const embedding = progress.filter((p) => p.stage === 'embedding');
    expect(embedding.length).toBeGreaterThan(0);
    const total = (seen.at(-1) as DocumentBody).chunk_count;
    for (const p of embedding) {
      expect(p.chunks_total).toBe(total);
      expect(p.chunks_embedded).toBeGreaterThanOrEqual(0);
      expect(p.chunks_embedded).toBeLessThanOrEqual(total);
    }
    // Counts only grow, and some were seen part-way.
    const counts = embedding.map((p) => p.chunks_embedded as number);
    expect([...counts].sort((a, b) => a - b)).toEqual(counts);
    expect(counts.some((n) => n > 0 && n < total)).toBe(true);
    for (const p of progress) expect(['parsing', 'chunking', 'embedding']).toContain(p.stage);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await getDocument(queued.id)).toMatchObject({ status: 'cancelled', chunk_count: 0 });
    expect((await search('progress', 'quartz note')).some((h) => h.content.includes('quartz'))).toBe(false);
  }, 180_000);

  it('cancels mid-embedding: the worker stops between batches and the document ends cancelled', async () => {
    await createCollection(t, 'cancel_new');
    const doc = await upload('cancel_new', 'long.txt', versionText('saffron', 80));
    const seen = await watch(
      doc.id,
      (d) => d.status === 'processing' && ((d.progress as { chunks_embedded: number | null }).chunks_embedded ?? 0) > 0,
    );
    const at = seen.at(-1)?.progress as { chunks_embedded: number; chunks_total: number };
    const r = await t.request(`/api/v1/rag/documents/${doc.id}/cancel`, { method: 'POST' });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ id: doc.id, status: 'cancelled', progress: null, chunk_count: 0 });
    expect(at.chunks_embedded).toBeLessThan(at.chunks_total);
    // The worker notices at its next batch and writes nothing.
    await workerStopped(doc.id);
    expect(await getDocument(doc.id)).toMatchObject({ status: 'cancelled', chunk_count: 0, version: 1 });
    expect(await search('cancel_new', 'saffron survey')).toEqual([]);
    // Nothing left to cancel.
    const again = await t.request(`/api/v1/rag/documents/${doc.id}/cancel`, { method: 'POST' });
    expect(again.status).toBe(409);
    expect(await again.json()).toEqual({ error: 'Document is not being processed: nothing to cancel' });
  }, 180_000);

  it('a cancelled replace keeps the previous version, searchable', async () => {
    await createCollection(t, 'cancel_replace');
    const doc = await upload('cancel_replace', 'keep.txt', versionText('indigo', 3));
    const v1 = await waitForDocument(t, doc.id);
    expect((await replace(doc.id, 'keep-v2.txt', versionText('crimson', 80))).status).toBe(202);
    await watch(doc.id, (d) => d.status === 'processing' && (d.progress as { stage: string }).stage === 'embedding');
    const r = await t.request(`/api/v1/rag/documents/${doc.id}/cancel`, { method: 'POST' });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({
      status: 'processed',
      version: 1,
      name: 'keep.txt',
      chunk_count: v1.chunk_count,
    });
    await workerStopped(doc.id);
    const hits = await search('cancel_replace', 'survey report');
    expect(hits.length).toBeGreaterThan(0);
    expect(hits.every((h) => h.content.includes('indigo'))).toBe(true);
    // A cancelled replace's content is not taken: it can be sent again.
    expect((await replace(doc.id, 'keep-v2.txt', versionText('crimson', 2))).status).toBe(202);
    expect(await waitForDocument(t, doc.id)).toMatchObject({ status: 'processed', version: 3 });
  }, 180_000);
});

/** Waits until the worker says it stopped the document's job. */
async function workerStopped(documentId: string, timeoutMs = 60_000): Promise<void> {
  const message = 'job stopped: cancelled or superseded';
  await until(
    `the worker to stop the job of ${documentId}`,
    () => t.logs.some((l) => l.msg === message && l.document_id === documentId),
    { timeoutMs },
  );
}
