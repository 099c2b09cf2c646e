import { afterAll, beforeAll, expect, it } from 'vitest';
import { startAppOnUpstreamEmbeddings, type TestApp } from '../support/app.ts';
import type { MockUpstream } from '../support/mock-upstream.ts';

// /embeddings relays vectors: it needs no dimensions measured first. The probe that measured them
// carried none of the client's fields, so a provider that requires one (NVIDIA NIM's asymmetric
// models want input_type) refused every call, the client's own never sent.
let upstream: MockUpstream;
let t: TestApp;
let close: () => Promise<void>;
beforeAll(async () => {
  ({ t, upstream, close } = await startAppOnUpstreamEmbeddings('nim', 'asym-embed', 6));
});
afterAll(() => close());

const embeddingCalls = () => upstream.requests.filter((r) => r.path === '/v1/embeddings').map((r) => r.body);

it("a model never used before: the client's call is the first the provider sees, with its fields", async () => {
  const response = await t.request('/api/v1/embeddings', {
    method: 'POST',
    json: { model: 'asym-embed', input: ['what is x?'], input_type: 'query' },
  });
  expect(response.status).toBe(200);
  const body = (await response.json()) as { data: { embedding: number[] }[] };
  expect(body.data[0]?.embedding).toHaveLength(6);
  expect(embeddingCalls()).toEqual([
    { model: 'asym-embed', input: ['what is x?'], encoding_format: 'base64', input_type: 'query' },
  ]);
  // A collection needs the dimensions fixed at creation: measured then.
  const created = await t.request('/api/v1/rag/collections', {
    method: 'POST',
    json: { name: 'asym', embedding_model: 'asym-embed' },
  });
  expect(created.status).toBe(201);
  expect(embeddingCalls()).toHaveLength(2);
});
