import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

describe('interactive reference', () => {
  it('serves the Swagger UI page and its assets with no key and no external URL', async () => {
    const page = await fetch(`${t.url}/api/v1/docs`, { redirect: 'follow' });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('swagger-ui');
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] as string);
    expect(assets.length).toBeGreaterThan(2);
    for (const asset of assets) {
      expect(asset, 'page references only local assets').not.toMatch(/^(https?:)?\/\//);
      const url = new URL(asset, page.url.endsWith('/') ? page.url : `${page.url}/`);
      const response = await fetch(url);
      expect(response.status, asset).toBe(200);
      if (asset.endsWith('initializer.js')) {
        // Comments may cite web pages; the code itself must point at nothing outside.
        const script = (await response.text()).replace(/^\s*\/\/.*$/gm, '');
        expect(script).not.toMatch(/https?:\/\//);
        expect(script).toContain('/api/v1/openapi.json');
      } else {
        await response.arrayBuffer();
      }
    }
  });

  it('publishes an OpenAPI document with every route, operationId, security and error responses', async () => {
    const response = await fetch(`${t.url}/api/v1/openapi.json`);
    expect(response.status).toBe(200);
    const doc = (await response.json()) as {
      openapi: string;
      paths: Record<
        string,
        Record<string, { operationId?: string; security?: unknown[]; responses: Record<string, unknown> }>
      >;
    };
    expect(doc.openapi).toMatch(/^3\./);
    for (const route of t.app.routes) {
      // A wildcard (ids with slashes) is documented as a named parameter (`/models/{model}`).
      const path = route.url.replace(/:(\w+)/g, '{$1}').replace(/\/\*$/, '/{model}');
      const operation = doc.paths[path]?.[route.method.toLowerCase()];
      expect(operation, `${route.method} ${path}`).toBeDefined();
      expect(operation?.operationId).toBe(route.operationId);
      expect(operation?.security).toEqual([{ bearerAuth: [] }]);
      expect(Object.keys(operation?.responses ?? {})).toEqual(
        expect.arrayContaining(['400', '401', '403', '404', '429', '500']),
      );
    }
    const ids = t.app.routes.map((r) => r.operationId);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('serves the OpenAPI document serialised once, with an ETag a client can revalidate', async () => {
    const first = await fetch(`${t.url}/api/v1/openapi.json`);
    expect(first.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const etag = first.headers.get('etag');
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{43}"$/);
    const body = await first.text();
    const again = await fetch(`${t.url}/api/v1/openapi.json`);
    expect(again.headers.get('etag')).toBe(etag);
    expect(await again.text()).toBe(body);
    const revalidated = await fetch(`${t.url}/api/v1/openapi.json`, { headers: { 'if-none-match': etag ?? '' } });
    expect(revalidated.status).toBe(304);
    expect(await revalidated.text()).toBe('');
    const stale = await fetch(`${t.url}/api/v1/openapi.json`, { headers: { 'if-none-match': '"other"' } });
    expect(stale.status).toBe(200);
    expect(await stale.text()).toBe(body);
  });

  it('documents the upload body, multipart and JSON, though the route reads it itself', async () => {
    const doc = (await (await fetch(`${t.url}/api/v1/openapi.json`)).json()) as {
      paths: Record<string, { post?: { requestBody?: { content: Record<string, { schema: unknown }> } } }>;
    };
    const content = doc.paths['/api/v1/rag/collections/{collection_name}/documents']?.post?.requestBody?.content;
    expect(content?.['multipart/form-data']?.schema).toMatchObject({
      type: 'object',
      required: ['file'],
      properties: { file: { type: 'string', format: 'binary' }, description: {}, metadata: {} },
    });
    expect(content?.['application/json']?.schema).toMatchObject({
      type: 'object',
      required: ['name', 'content'],
      properties: { name: {}, content: {}, description: {}, metadata: { type: 'object' } },
    });
  });

  it('health endpoints need no key', async () => {
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${t.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready', checks: { database: { ok: true } } });
  });
});
