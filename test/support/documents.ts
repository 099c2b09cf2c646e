import { expect } from 'vitest';
import type { TestApp } from './app.ts';
import { until } from './poll.ts';

export interface DocumentBody {
  id: string;
  status: string;
  error: string | null;
  chunk_count: number;
  [key: string]: unknown;
}

/** Polls a document until ingestion settles (processed or failed). */
export async function waitForDocument(t: TestApp, id: string, key?: string, timeoutMs = 60_000): Promise<DocumentBody> {
  let last: DocumentBody | undefined;
  return until(
    `document ${id} to settle`,
    async () => {
      const response = await t.request(`/api/v1/rag/documents/${id}`, key ? { key } : {});
      expect(response.status).toBe(200);
      last = (await response.json()) as DocumentBody;
      return last.status === 'processed' || last.status === 'failed' ? last : undefined;
    },
    { timeoutMs, intervalMs: 100, detail: () => `still ${last?.status ?? 'unknown'}` },
  );
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
