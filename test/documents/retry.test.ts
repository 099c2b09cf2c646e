/**
 * A first upload that never completed (cancelled, or failed) has no current version: the same bytes
 * sent again with PUT on that document are ingested again, which is how a client retries after a
 * cancel or a transient failure. A new upload of those bytes is still a 409 naming the document.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startTestApp } from '../support/app.ts';
import { sharedDocument } from '../support/fixtures.ts';
import { createCollection, uploadFile, waitForDocument, type DocumentBody } from '../support/documents.ts';

// One job at a time: a long document keeps the worker busy while the next one waits, pending.
const t = await startTestApp({ config: { ingestionConcurrency: 1, ingestionEmbedBatch: 4 } });
afterAll(() => t.close());

const paragraphs = (marker: string, count: number) =>
  Array.from(
    { length: count },
    (_, i) => `Paragraph ${i} of the ${marker} notes: lighthouses, keepers and the ${marker} rota in district ${i}. `,
  )
    .map((p) => p.repeat(6))
    .join('\n\n');

async function upload(collection: string, name: string, content: string): Promise<Response> {
  return t.request(`/api/v1/rag/collections/${collection}/documents`, { method: 'POST', json: { name, content } });
}

const replace = (id: string, name: string, content: string) =>
  t.request(`/api/v1/rag/documents/${id}`, { method: 'PUT', json: { name, content } });

describe('a first upload that never completed', () => {
  it('cancelled: a PUT of the same bytes ingests them again; a new upload of them is a 409 naming it', async () => {
    await createCollection(t, 'retry_cancelled');
    expect((await upload('retry_cancelled', 'blocker.txt', paragraphs('umber', 60))).status).toBe(202);
    const content = paragraphs('teal', 2);
    const first = (await (await upload('retry_cancelled', 'notes.txt', content)).json()) as DocumentBody;
    // While its upload is still under way (pending behind the blocker), its own bytes are a 409.
    const underWay = await replace(first.id, 'notes.txt', content);
    expect(underWay.status).toBe(409);
    expect(await underWay.json()).toEqual({ error: 'Document already exists', document_id: first.id });
    const cancelled = await t.request(`/api/v1/rag/documents/${first.id}/cancel`, { method: 'POST' });
    expect(await cancelled.json()).toMatchObject({ status: 'cancelled', chunk_count: 0, version: 1 });

    const again = await upload('retry_cancelled', 'notes-again.txt', content);
    expect(again.status).toBe(409);
    expect(await again.json()).toEqual({ error: 'Document already exists', document_id: first.id });

    const retried = await replace(first.id, 'notes.txt', content);
    expect(retried.status).toBe(202);
    expect(await retried.json()).toMatchObject({ id: first.id, status: 'pending' });
    const done = await waitForDocument(t, first.id);
    // Ingested as a replace: the upload that never completed took number 1.
    // Nothing was replaced: the document had no version before this one.
    expect(done).toMatchObject({ status: 'processed', error: null, name: 'notes.txt', version: 2, replaced_at: null });
    expect(done.chunk_count).toBeGreaterThan(0);

    // Now it is the document's current version: the same bytes are a 409 again, either way.
    expect((await replace(first.id, 'notes.txt', content)).status).toBe(409);
    expect((await upload('retry_cancelled', 'notes-3.txt', content)).status).toBe(409);
  }, 180_000);

  it('failed: a PUT of the same bytes is accepted and ingested again', async () => {
    await createCollection(t, 'retry_failed');
    const broken = new TextEncoder().encode('%PDF-1.7\n1 0 obj << /Type /Catalog >> no xref at all');
    const response = await uploadFile(t, 'retry_failed', 'broken.pdf', broken, { type: 'application/pdf' });
    const first = await waitForDocument(t, ((await response.json()) as { id: string }).id);
    expect(first).toMatchObject({ status: 'failed', chunk_count: 0 });

    const form = new FormData();
    form.set('file', new Blob([broken], { type: 'application/pdf' }), 'broken.pdf');
    const retried = await t.request(`/api/v1/rag/documents/${first.id}`, { method: 'PUT', body: form });
    expect(retried.status).toBe(202);
    expect(await retried.json()).toMatchObject({ id: first.id, status: 'pending' });
    // The same bytes fail the same way; what matters is that they were taken and parsed again.
    expect(await waitForDocument(t, first.id)).toMatchObject({ status: 'failed', error: first.error });

    // A real document under that id afterwards is ingested as any replace.
    const pdf = sharedDocument('crazyones.pdf');
    const fixed = new FormData();
    fixed.set('file', new Blob([pdf], { type: 'application/pdf' }), 'crazyones.pdf');
    expect((await t.request(`/api/v1/rag/documents/${first.id}`, { method: 'PUT', body: fixed })).status).toBe(202);
    expect(await waitForDocument(t, first.id)).toMatchObject({ status: 'processed', name: 'crazyones.pdf' });
  }, 180_000);
});
