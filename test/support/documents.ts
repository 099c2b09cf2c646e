import { expect } from 'vitest';
import type { TestApp } from './app.ts';

export interface DocumentBody {
  id: string;
  status: string;
  error: string | null;
  chunk_count: number;
  [key: string]: unknown;
}

/** Polls a document until ingestion settles (processed or failed). */
export async function waitForDocument(t: TestApp, id: string, key?: string, timeoutMs = 60_000): Promise<DocumentBody> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const response = await t.request(`/api/v1/rag/documents/${id}`, key ? { key } : {});
    expect(response.status).toBe(200);
    const doc = (await response.json()) as DocumentBody;
    if (doc.status === 'processed' || doc.status === 'failed') return doc;
    if (Date.now() > deadline) throw new Error(`document ${id} still ${doc.status} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function uploadFile(
  t: TestApp,
  collection: string,
  name: string,
  bytes: Uint8Array,
  options: { type?: string; metadata?: Record<string, unknown>; description?: string; key?: string } = {},
): Promise<Response> {
  const form = new FormData();
  form.set('file', new Blob([bytes], { type: options.type ?? 'application/octet-stream' }), name);
  if (options.description !== undefined) form.set('description', options.description);
  if (options.metadata !== undefined) form.set('metadata', JSON.stringify(options.metadata));
  return t.request(`/api/v1/rag/collections/${collection}/documents`, {
    method: 'POST',
    body: form,
    ...(options.key ? { key: options.key } : {}),
  });
}

export async function createCollection(t: TestApp, name: string, extra: Record<string, unknown> = {}) {
  const response = await t.request('/api/v1/rag/collections', { method: 'POST', json: { name, ...extra } });
  expect(response.status).toBe(201);
  return (await response.json()) as { id: string; name: string; dimensions: number };
}
