import { Agent, request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection } from '../support/documents.ts';

const agent = new Agent({ keepAlive: true });

/** One request through a keep-alive agent, with the response's Connection header. */
const get = (url: string, path: string) =>
  new Promise<{ status: number; connection: string | undefined; body: string }>((resolve, reject) => {
    const req = request(url + path, { agent }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }));
    });
    req.on('error', reject);
    req.end();
  });

describe('a draining instance (beginShutdown, before the listener closes)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
    await createCollection(t, 'drain');
  });
  afterAll(async () => {
    agent.destroy();
    await t.close();
  });

  it('answers /readyz 503 at once, closes connections after each response, and stops its in-process worker', async () => {
    const ready = await get(t.url, '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.connection).toBe('keep-alive');

    t.app.beginShutdown();
    const draining = await get(t.url, '/readyz');
    expect(draining.status).toBe(503);
    expect(JSON.parse(draining.body)).toMatchObject({ status: 'shutting_down' });
    expect(draining.connection).toBe('close');

    // Uploads are still accepted and queued, but this instance no longer processes them.
    const upload = await t.request('/api/v1/rag/collections/drain/documents', {
      method: 'POST',
      json: { name: 'later.txt', content: 'Queued while draining: another instance or worker takes it.' },
    });
    expect(upload.status).toBe(202);
    const { id } = (await upload.json()) as { id: string };
    // A running worker is woken by the upload and would claim it within the poll interval (1 s).
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const doc = (await (await t.request(`/api/v1/rag/documents/${id}`)).json()) as { status: string };
    expect(doc.status).toBe('pending');
  });
});
