import { execFile, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

const execFileAsync = promisify(execFile);

let jina: MockUpstream;
let backup: MockUpstream;
let cohere: MockUpstream;
let t: TestApp;
let key: { id: string; key: string };

beforeAll(async () => {
  jina = await startMockUpstream({ models: ['jina-reranker-v2'], rerankFormat: 'jina' });
  backup = await startMockUpstream({ models: ['jina-reranker-v2'], rerankFormat: 'jina' });
  // Discovered, not listed: its /models names a rerank model.
  cohere = await startMockUpstream({ models: ['rerank-v3.5', 'mock-chat'], rerankFormat: 'cohere' });
  t = await startTestApp({
    gateway: {
      providers: [
        { name: 'jina', base_url: jina.url, models: [], rerank_models: ['jina-reranker-v2'] },
        { name: 'backup', base_url: backup.url, models: [], rerank_models: ['jina-reranker-v2'], priority: 1 },
        { name: 'cohere', base_url: cohere.url },
      ],
      aliases: { reranker: 'jina-reranker-v2' },
      retry: { max_retries: 1, base_delay_ms: 1 },
      circuit_breaker: { failure_threshold: 100 },
    },
  });
  key = await t.createKey({ name: 'rerank', scopes: ['embeddings'] });
});
afterAll(async () => {
  await t.close();
  await jina.close();
  await backup.close();
  await cohere.close();
});
beforeEach(() => {
  jina.reset();
  backup.reset();
  cohere.reset();
});

interface RerankResponse {
  id: string;
  model: string;
  results: { index: number; relevance_score: number; document?: { text: string } & Record<string, unknown> }[];
  usage: { total_tokens: number };
  meta: { billed_units: { search_units: number }; tokens: { input_tokens: number; output_tokens: number } };
}

const documents = [
  'Carson City is the capital city of the American state of Nevada.',
  'The Commonwealth of the Northern Mariana Islands is a group of islands in the Pacific Ocean. Its capital is Saipan.',
  'Washington, D.C. is the capital of the United States.',
  'Capital punishment has existed in the United States since before it was a country.',
];
const query = 'What is the capital of the United States?';
const rerank = (body: unknown, k: string = key.key) =>
  t.request('/api/v1/rerank', { method: 'POST', key: k, json: body });

describe('POST /api/v1/rerank', () => {
  it('answers a Cohere/Jina client: results best first with index, relevance_score and the document; usage', async () => {
    const response = await rerank({ model: 'jina-reranker-v2', query, documents, top_n: 2 });
    expect(response.status).toBe(200);
    const body = (await response.json()) as RerankResponse;
    expect(body.model).toBe('jina-reranker-v2');
    expect(body.id).toMatch(/^rerank-/);
    expect(body.results).toHaveLength(2);
    expect(body.results[0]).toMatchObject({ index: 2, document: { text: documents[2] } });
    expect(body.results[0]?.relevance_score).toBeGreaterThan(body.results[1]?.relevance_score ?? Infinity);
    // What reached the upstream: the wire format, documents as strings, top_n passed on.
    const sent = jina.requests.find((r) => r.path === '/v1/rerank')?.body;
    expect(sent).toEqual({ model: 'jina-reranker-v2', query, documents, top_n: 2 });
    // The upstream's token count is the usage, counted against the key.
    const upstreamTokens = (JSON.parse(jina.requests[0]?.sent ?? '{}') as { usage: { total_tokens: number } }).usage
      .total_tokens;
    expect(body.usage.total_tokens).toBe(upstreamTokens);
    expect(body.meta).toEqual({
      billed_units: { search_units: 1 },
      tokens: { input_tokens: upstreamTokens, output_tokens: 0 },
    });
    expect(t.app.usage.tokensRecorded(key.id)).toBeGreaterThanOrEqual(upstreamTokens);
  });

  it('document objects with `text` come back as given; return_documents false leaves them out; top_n defaults to all', async () => {
    const objects = documents.map((text, i) => ({ text, source: `doc-${i}` }));
    const withDocs = (await (await rerank({ model: 'reranker', query, documents: objects })).json()) as RerankResponse;
    expect(withDocs.results.map((r) => r.index).sort()).toEqual([0, 1, 2, 3]);
    expect(withDocs.results[0]?.document).toEqual({ text: documents[2], source: 'doc-2' });
    const sent = jina.requests.find((r) => r.path === '/v1/rerank')?.body;
    expect(sent?.model).toBe('jina-reranker-v2'); // the alias resolved
    expect(sent?.documents).toEqual(documents);

    const bare = (await (
      await rerank({ model: 'jina-reranker-v2', query, documents, top_n: 10, return_documents: false })
    ).json()) as RerankResponse;
    expect(bare.results).toHaveLength(4);
    expect(bare.results.every((r) => r.document === undefined)).toBe(true);
    const scores = bare.results.map((r) => r.relevance_score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
  });

  it('a Cohere-shaped upstream (meta, no token count) on a discovered model: ragport counts the tokens', async () => {
    const before = t.app.usage.tokensRecorded(key.id);
    const body = (await (await rerank({ model: 'rerank-v3.5', query, documents, top_n: 1 })).json()) as RerankResponse;
    expect(cohere.count('/v1/rerank')).toBe(1);
    expect(body.results).toEqual([{ index: 2, relevance_score: expect.any(Number), document: { text: documents[2] } }]);
    expect(body.usage.total_tokens).toBeGreaterThan(documents.join(' ').split(' ').length);
    expect(t.app.usage.tokensRecorded(key.id) - before).toBe(body.usage.total_tokens);
  });

  it('a discovered rerank model is not listed as a chat model', async () => {
    const models = (await (await t.request('/api/v1/models')).json()) as { data: { id: string }[] };
    const ids = models.data.map((m) => m.id);
    expect(ids).toContain('mock-chat');
    expect(ids).not.toContain('rerank-v3.5');
  });

  it('fails over to the next provider when the first one errors, and answers 502 when all do', async () => {
    jina.inject({ kind: 'status', status: 503 }, 2);
    const response = await rerank({ model: 'jina-reranker-v2', query, documents, top_n: 1 });
    expect(response.status).toBe(200);
    expect(((await response.json()) as RerankResponse).results[0]?.index).toBe(2);
    expect(jina.count('/v1/rerank')).toBe(2);
    expect(backup.count('/v1/rerank')).toBe(1);

    jina.inject({ kind: 'reset' }, 2);
    backup.inject({ kind: 'status', status: 500 }, 2);
    const failed = await rerank({ model: 'jina-reranker-v2', query, documents });
    expect(failed.status).toBe(502);
    expect(((await failed.json()) as { error: { code: string } }).error.code).toBe('upstream_error');
  });

  it("an upstream's client error goes back to the client, with no failover", async () => {
    jina.inject({ kind: 'status', status: 400, message: 'query too long' });
    const refused = await rerank({ model: 'jina-reranker-v2', query, documents });
    expect(refused.status).toBe(400);
    expect(backup.count('/v1/rerank')).toBe(0);
  });

  it('structured 4xx for bad requests, before any upstream call', async () => {
    const cases: [unknown, number, string][] = [
      [{ model: 'jina-reranker-v2', query, documents: [] }, 400, 'documents'],
      [{ model: 'jina-reranker-v2', query: '', documents }, 400, 'query'],
      [{ model: 'jina-reranker-v2', documents }, 400, 'query'],
      [{ model: 'jina-reranker-v2', query, documents, top_n: 0 }, 400, 'top_n'],
      [{ model: 'jina-reranker-v2', query, documents: [{ title: 'no text' }] }, 400, 'an object with a string `text`'],
      [{ model: 'jina-reranker-v2', query, documents: Array.from({ length: 1001 }, () => 'x') }, 400, 'documents'],
      [{ model: 'unknown-reranker', query, documents }, 404, 'model'],
      [{ model: 'mock-chat', query, documents }, 404, 'model'],
    ];
    for (const [body, status, param] of cases) {
      const response = await rerank(body);
      expect(response.status, JSON.stringify(body).slice(0, 80)).toBe(status);
      const error = ((await response.json()) as { error: { param?: string; message: string } }).error;
      expect(`${error.param ?? ''} ${error.message}`).toContain(param);
    }
    expect(jina.count('/v1/rerank') + backup.count('/v1/rerank') + cohere.count('/v1/rerank')).toBe(0);
  });

  it('needs the embeddings scope', async () => {
    const chatOnly = await t.createKey({ name: 'chat-only', scopes: ['chat'] });
    const response = await rerank({ model: 'jina-reranker-v2', query, documents }, chatOnly.key);
    expect(response.status).toBe(403);
  });
});

describe("POST /api/v2/rerank (the path Cohere's v2 SDK calls)", () => {
  const rerankV2 = (body: unknown, k: string = key.key) =>
    t.request('/api/v2/rerank', { method: 'POST', key: k, json: body });

  it('is the same operation: a v2 request (max_tokens_per_doc) is answered in the same shape', async () => {
    const response = await rerankV2({ model: 'rerank-v3.5', query, documents, top_n: 2, max_tokens_per_doc: 4096 });
    expect(response.status).toBe(200);
    const body = (await response.json()) as RerankResponse;
    expect(body.results.map((r) => r.index)).toEqual([2, expect.any(Number)]);
    expect(body.meta.billed_units.search_units).toBe(1);
    expect(cohere.requests.find((r) => r.path === '/v1/rerank')?.body).toEqual({
      model: 'rerank-v3.5',
      query,
      documents,
      top_n: 2,
    });
  });

  it('checks the key and its scope, and validates like /api/v1/rerank', async () => {
    expect((await rerankV2({ model: 'rerank-v3.5', query, documents }, 'rpk_not-a-key')).status).toBe(401);
    const chatOnly = await t.createKey({ name: 'chat-only-v2', scopes: ['chat'] });
    expect((await rerankV2({ model: 'rerank-v3.5', query, documents }, chatOnly.key)).status).toBe(403);
    const invalid = await rerankV2({ model: 'rerank-v3.5', query, documents: [] });
    expect(invalid.status).toBe(400);
    expect(((await invalid.json()) as { error: { code: string } }).error.code).toBe('invalid_value');
    expect(cohere.count('/v1/rerank')).toBe(0);
  });
});

// Cohere's official Python SDK (installed beside openai by .ci/sdk-python.sh; skipped without it),
// with base_url at ragport's /api: its v1 client posts to /api/v1/rerank, its v2 client to
// /api/v2/rerank.
const python = process.env.RAGPORT_TEST_PYTHON;
const hasCohere = python !== undefined && spawnSync(python, ['-c', 'import cohere'], { stdio: 'ignore' }).status === 0;

describe.skipIf(!hasCohere)("Cohere's Python SDK", () => {
  it('Client (v1) and ClientV2 rerank through ragport with base_url …/api', async () => {
    const script = `
import json, sys, cohere
base, key, docs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
out = {}
for name, client in (("v1", cohere.Client(api_key=key, base_url=base)), ("v2", cohere.ClientV2(api_key=key, base_url=base))):
    r = client.rerank(model="rerank-v3.5", query=sys.argv[4], documents=docs, top_n=2)
    out[name] = {"indexes": [x.index for x in r.results], "scores": [x.relevance_score for x in r.results],
                 "search_units": r.meta.billed_units.search_units}
print(json.dumps(out))
`;
    const { stdout } = await execFileAsync(
      python as string,
      ['-c', script, `${t.url}/api`, key.key, JSON.stringify(documents), query],
      { timeout: 60_000 },
    );
    const out = JSON.parse(stdout) as Record<
      'v1' | 'v2',
      { indexes: number[]; scores: number[]; search_units: number }
    >;
    for (const version of ['v1', 'v2'] as const) {
      expect(out[version].indexes[0], version).toBe(2);
      expect(out[version].indexes).toHaveLength(2);
      expect(out[version].scores[0]).toBeGreaterThan(out[version].scores[1] ?? Infinity);
      expect(out[version].search_units).toBe(1);
    }
    expect(cohere.count('/v1/rerank')).toBe(2);
  });

  it("docs/gateway.md's Python example runs as shown", async () => {
    const page = readFileSync(new URL('../../docs/gateway.md', import.meta.url), 'utf8');
    const code = /```python\n([\s\S]*?)```/.exec(page.slice(page.indexOf('## Reranking')))?.[1];
    expect(code).toContain('cohere.ClientV2');
    const { stdout } = await execFileAsync(python as string, ['-c', code as string], {
      timeout: 60_000,
      env: { ...process.env, RAGPORT: t.url, KEY: key.key },
    });
    const [index, score] = stdout.trim().split(' ');
    expect(index).toBe('1'); // Washington, D.C.
    expect(Number(score)).toBeGreaterThan(0);
    expect(cohere.requests.find((r) => r.path === '/v1/rerank')?.body).toMatchObject({
      model: 'rerank-v3.5',
      top_n: 1,
    });
  });
});
