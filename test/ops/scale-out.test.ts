import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { randomBase62 } from '../../src/db/ids.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';
import { metricValue, scrape } from '../support/metrics.ts';
import { call as request, type CallInit } from '../support/http.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';
import { freePort, spawnRagport, startServerProcess, waitUntil, type RagportProcess } from '../support/processes.ts';

const serverUrl = process.env.TEST_DATABASE_URL;
const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const adminKey = `admin_${randomBase62(40)}`;
const metricsToken = `scrape_${randomBase62(24)}`;

type Api = RagportProcess & { url: string };

const call = (api: Api, pathname: string, init: CallInit = {}) =>
  request(api.url, pathname, { key: adminKey, ...init });

/** Waits, when needed, so that a burst of requests stays inside one clock minute (one rate-limit window). */
async function awayFromMinuteEdge(): Promise<void> {
  const intoMinute = Date.now() % 60_000;
  if (intoMinute > 45_000) await new Promise((resolve) => setTimeout(resolve, 60_500 - intoMinute));
}

describe.skipIf(!serverUrl)(
  'two API processes and one worker process on one PostgreSQL server and one Redis (needs TEST_DATABASE_URL)',
  () => {
    let db: TestDatabase;
    let mock: MockUpstream;
    let a: Api;
    let b: Api;
    let worker: RagportProcess;
    let workerMetrics: string;
    const documentIds: string[] = [];

    beforeAll(async () => {
      db = await openTestDatabase();
      mock = await startMockUpstream({ completionTokens: 4 });
      const shared = {
        DATABASE_URL: db.url as string,
        REDIS_URL: redisUrl,
        RATE_LIMIT_REDIS_FAILURE: 'closed',
        RAGPORT_ADMIN_KEY: adminKey,
        OPENAI_API_KEY: 'sk-mock',
        OPENAI_BASE_URL: mock.url,
        METRICS_TOKEN: metricsToken,
        // Other test files share this Redis and this address.
        RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: '100000',
      };
      // The API processes run no ingestion: every document is the worker process's.
      [a, b] = await Promise.all([
        startServerProcess({ ...shared, INGESTION_CONCURRENCY: '0' }),
        startServerProcess({ ...shared, INGESTION_CONCURRENCY: '0' }),
      ]);
      const metricsPort = await freePort();
      worker = spawnRagport('worker', { ...shared, INGESTION_CONCURRENCY: '2', METRICS_PORT: String(metricsPort) });
      workerMetrics = `http://127.0.0.1:${metricsPort}`;
      await waitUntil('worker up', async () => (await fetch(`${workerMetrics}/healthz`)).ok, { process: worker });
    }, 180_000);

    afterAll(async () => {
      const exits = await Promise.all([a, b, worker].filter(Boolean).map((p) => p.stop('SIGTERM')));
      await mock?.close();
      await db?.close();
      // Every process shut down cleanly.
      expect(exits.every((e) => e.code === 0)).toBe(true);
    }, 60_000);

    it('uploads through both APIs: each document stored once, processed once by the worker, none lost', async () => {
      expect((await call(a, '/api/v1/rag/collections', { method: 'POST', json: { name: 'shared' } })).status).toBe(201);
      expect((await call(b, '/api/v1/rag/collections/shared')).status).toBe(200);

      const topics = ['graceful shutdown', 'rate limits', 'vector indexes', 'job leases', 'read replicas'];
      const uploads = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          call(i % 2 === 0 ? a : b, '/api/v1/rag/collections/shared/documents', {
            method: 'POST',
            json: {
              name: `doc-${i}.txt`,
              content: `Document ${i} is about ${topics[i % topics.length]}.\n\n${'Scale-out keeps one queue. '.repeat(30 + i)}`,
            },
          }),
        ),
      );
      expect(uploads.map((r) => r.status)).toEqual(Array(20).fill(202));
      for (const r of uploads) documentIds.push(((await r.json()) as { id: string }).id);

      // The same bytes to both instances at once: one document, the other a 409 naming it.
      const same = { name: 'twice.txt', content: 'Uploaded to both instances at the same moment.' };
      const racing = await Promise.all(
        [a, b].map((api) => call(api, '/api/v1/rag/collections/shared/documents', { method: 'POST', json: same })),
      );
      const bodies = (await Promise.all(racing.map((r) => r.json()))) as { id?: string; document_id?: string }[];
      expect(racing.map((r) => r.status).sort()).toEqual([202, 409]);
      const created = bodies[racing.findIndex((r) => r.status === 202)]?.id as string;
      expect(bodies[racing.findIndex((r) => r.status === 409)]).toEqual({
        error: 'Document already exists',
        document_id: created,
      });
      documentIds.push(created);

      await waitUntil(
        'every document processed',
        async () => {
          const [row] = await queryRows<{ pending: number }>(
            db.database.db,
            sql`select count(*) filter (where status <> 'processed')::int as pending from documents`,
          );
          return row?.pending === 0;
        },
        { process: worker, timeoutMs: 240_000 },
      );
      const [counts] = await queryRows<{
        documents: number;
        distinct_ids: number;
        chunks: number;
        counted: number;
        duplicated: number;
        unfinished: number;
      }>(
        db.database.db,
        sql`select (select count(*) from documents)::int as documents,
                   (select count(distinct id) from documents)::int as distinct_ids,
                   (select count(*) from chunks)::int as chunks,
                   (select sum(chunk_count) from documents)::int as counted,
                   (select count(*) from (select document_id, position from chunks group by 1, 2 having count(*) > 1) d)::int
                     as duplicated,
                   (select count(*) from ingestion_jobs where status <> 'done')::int as unfinished`,
      );
      expect(counts).toMatchObject({ documents: 21, distinct_ids: 21, duplicated: 0, unfinished: 0 });
      expect(counts?.chunks).toBe(counts?.counted);
      const listing = (await (await call(b, '/api/v1/rag/collections/shared/documents?page_size=100')).json()) as {
        total: number;
        documents: { id: string }[];
      };
      expect(listing.total).toBe(21);
      expect(listing.documents.map((d) => d.id).sort()).toEqual([...documentIds].sort());
      // The worker process did every job (the APIs run none), as its own metrics say.
      const samples = await scrape(`${workerMetrics}/metrics`, metricsToken);
      expect(metricValue(samples, 'ragport_ingestion_jobs_total', { outcome: 'processed' })).toBe(21);
      expect(metricValue(samples, 'ragport_embedding_texts_total', { priority: 'bulk' })).toBe(counts?.chunks);
    }, 300_000);

    it('searches and chat completions answer the same through either instance', async () => {
      const search = async (api: Api) => {
        const r = await call(api, '/api/v1/agent/tool-calling', {
          method: 'POST',
          json: {
            tool_name: 'rag_search',
            parameters: { query: 'job leases', collection: 'shared', top_k: 3, similarity_threshold: 0 },
          },
        });
        expect(r.status).toBe(200);
        return ((await r.json()) as { results: { document_id: string; content: string }[] }).results;
      };
      const [fromA, fromB] = await Promise.all([search(a), search(b)]);
      expect(fromA).toHaveLength(3);
      // Every chunk is indexed under its document's first line, so the best hit may be any chunk
      // of a document about job leases (documents 3, 8, 13, 18), not only the one holding the line.
      const aboutJobLeases = documentIds.filter((_, i) => i % 5 === 3);
      expect(aboutJobLeases).toContain(fromA[0]?.document_id);
      expect(fromB.map((h) => h.document_id)).toEqual(fromA.map((h) => h.document_id));

      for (const api of [a, b]) {
        const client = new OpenAI({ apiKey: adminKey, baseURL: `${api.url}/api/v1`, maxRetries: 0 });
        const completion = await client.chat.completions.create({
          model: 'mock-chat',
          messages: [{ role: 'user', content: 'hello' }],
        });
        expect(completion.choices[0]?.message.content).toBe('w0 w1 w2 w3 ');
        const stream = await client.chat.completions.create({
          model: 'mock-chat',
          messages: [{ role: 'user', content: 'hello' }],
          stream: true,
        });
        let text = '';
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
        expect(text).toBe('w0 w1 w2 w3 ');
      }
    }, 60_000);

    it('rate limits hold exactly across both instances', async () => {
      const key = (await (
        await call(a, '/api/v1/keys', {
          method: 'POST',
          json: { name: 'split', scopes: ['read'], tier: 'enterprise', rate_limits: { requests_per_minute: 25 } },
        })
      ).json()) as { key: string };
      const rejected = async () =>
        metricValue(await scrape(`${a.url}/metrics`, metricsToken), 'ragport_rate_limit_rejections_total') +
        metricValue(await scrape(`${b.url}/metrics`, metricsToken), 'ragport_rate_limit_rejections_total');
      const before = await rejected();
      await awayFromMinuteEdge();
      const responses = await Promise.all(
        Array.from({ length: 60 }, (_, i) => call(i % 2 === 0 ? a : b, '/api/v1/models', { key: key.key })),
      );
      await Promise.all(responses.map((r) => r.arrayBuffer()));
      const statuses = responses.map((r) => r.status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(25);
      expect(statuses.filter((s) => s === 429)).toHaveLength(35);
      expect(await rejected()).toBe(before + 35);
    }, 120_000);

    it('a key revoked through instance A is refused by instance B at once', async () => {
      const key = (await (
        await call(a, '/api/v1/keys', { method: 'POST', json: { name: 'short-lived', scopes: ['read'] } })
      ).json()) as { id: string; key: string };
      expect((await call(b, '/api/v1/models', { key: key.key })).status).toBe(200);
      expect((await call(a, `/api/v1/keys/${key.id}`, { method: 'DELETE' })).status).toBe(200);
      const refused = await call(b, '/api/v1/models', { key: key.key });
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({ error: { code: 'invalid_api_key' } });
    });
  },
);
