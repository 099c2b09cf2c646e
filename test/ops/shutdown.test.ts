import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { randomBase62 } from '../../src/db/ids.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import { call as request, type CallInit } from '../support/http.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';
import { spawnRagport, startServerProcess, waitUntil, type RagportProcess } from '../support/processes.ts';

const adminKey = `admin_${randomBase62(40)}`;
const running: RagportProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop('SIGKILL')));
});

/** A long document: embedding it keeps a worker busy for seconds. */
const longText = () =>
  Array.from(
    { length: 3_000 },
    (_, i) => `Paragraph ${i} explains graceful shutdown, leases and queues once more.`,
  ).join('\n\n');

const call = (url: string, pathname: string, init: CallInit = {}) => request(url, pathname, { key: adminKey, ...init });

/** A document whose chunks are being embedded, some already. */
const embedding = (doc: unknown) => {
  const { progress } = doc as { progress: { stage: string; chunks_embedded: number | null } | null };
  return progress?.stage === 'embedding' && (progress.chunks_embedded ?? 0) > 0;
};

/** Resolves once connecting to the url fails: the listener is closed. */
const refused = (url: string) =>
  waitUntil(
    'connections refused',
    () =>
      fetch(`${url}/healthz`).then(
        () => false,
        (error: Error & { cause?: { code?: string } }) => error.cause?.code === 'ECONNREFUSED',
      ),
    // The signal is handled once the event loop is free: in-process embedding batches block it.
    { timeoutMs: 60_000 },
  );

/** Reads a streamed response until `until` holds for what came so far. */
async function readUntil(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  sofar: string,
  until: (s: string) => boolean,
) {
  const decoder = new TextDecoder();
  let text = sofar;
  while (!until(text)) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  return text;
}

describe('SIGTERM on node src/server.ts', () => {
  let mock: MockUpstream;
  let dataDir: string;
  beforeAll(async () => {
    mock = await startMockUpstream({ completionTokens: 12, tokensPerSecond: 8 });
    dataDir = mkdtempSync(path.join(tmpdir(), 'ragport-shutdown-'));
  });
  afterAll(async () => {
    await mock.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const serverEnv = (extra: Record<string, string> = {}) => ({
    DATA_DIR: dataDir,
    RAGPORT_ADMIN_KEY: adminKey,
    OPENAI_API_KEY: 'sk-mock',
    OPENAI_BASE_URL: mock.url,
    // Only the shutdown flush can write usage before the process is gone.
    USAGE_FLUSH_INTERVAL_MS: '3600000',
    ...extra,
  });

  const startStream = async (url: string, key: string) => {
    const response = await call(url, '/api/v1/chat/completions', {
      method: 'POST',
      key,
      json: { model: 'mock-chat', messages: [{ role: 'user', content: 'tell me slowly' }], stream: true },
    });
    if (response.status !== 200) throw new Error(`${response.status} ${await response.text()}`);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    return { reader, first: await readUntil(reader, '', (s) => s.includes('data: ')) };
  };

  it('drains: refuses new connections, lets the stream finish, returns the claimed job, flushes usage, exits 0', async () => {
    const server = await startServerProcess(serverEnv({ INGESTION_CONCURRENCY: '1', SHUTDOWN_TIMEOUT_MS: '20000' }));
    running.push(server);
    const key = (await (
      await call(server.url, '/api/v1/keys', { method: 'POST', json: { name: 'streamer', scopes: ['chat'] } })
    ).json()) as { id: string; key: string };
    expect(
      (await call(server.url, '/api/v1/rag/collections', { method: 'POST', json: { name: 'drain' } })).status,
    ).toBe(201);
    // Model discovery first: it must not wait behind the ingestion that follows.
    expect((await call(server.url, '/api/v1/models')).status).toBe(200);
    const upload = await call(server.url, '/api/v1/rag/collections/drain/documents', {
      method: 'POST',
      json: { name: 'long.txt', content: longText() },
    });
    const { id: documentId } = (await upload.json()) as { id: string };
    // Signalled while its chunks are being embedded: a process that exits during an ONNX Runtime
    // run aborts (status 134) unless the model threads are let finish first.
    await waitUntil('the in-process worker embeds the document', async () =>
      embedding(await (await call(server.url, `/api/v1/rag/documents/${documentId}`)).json()),
    );

    const { reader, first } = await startStream(server.url, key.key);
    const signalledAt = Date.now();
    server.child.kill('SIGTERM');
    await refused(server.url);
    const body = await readUntil(reader, first, (s) => s.endsWith('data: [DONE]\n\n'));
    // The whole completion, no error event.
    expect(body.match(/"content":"w\d+ "/g)).toHaveLength(12);
    expect(body).not.toContain('"error"');
    expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(await server.exited).toEqual({ code: 0, signal: null });
    // Never past the deadline by more than closing takes: an embedding batch in flight holds the event
    // loop until it ends (ONNX Runtime runs on the main thread), which on a loaded machine reaches it.
    expect(Date.now() - signalledAt).toBeLessThan(20_000 + 10_000);
    expect(server.output()).toContain('returned unfinished jobs to the queue');

    // Same data directory, no worker: the job is back in the queue and the usage was written.
    const after = await startServerProcess(serverEnv({ INGESTION_CONCURRENCY: '0' }));
    running.push(after);
    const doc = (await (await call(after.url, `/api/v1/rag/documents/${documentId}`)).json()) as {
      status: string;
      chunk_count: number;
    };
    expect(doc).toMatchObject({ status: 'pending', chunk_count: 0 });
    const usage = (await (await call(after.url, `/api/v1/keys/${key.id}/usage`)).json()) as {
      quota: { tokens_per_month: { used: number } };
    };
    expect(usage.quota.tokens_per_month.used).toBeGreaterThanOrEqual(12);
    expect(await after.stop()).toEqual({ code: 0, signal: null });
  }, 120_000);

  it('past SHUTDOWN_TIMEOUT_MS an open stream ends with an error event and [DONE], the upstream is aborted, exit 0', async () => {
    mock.reset();
    mock.options.completionTokens = 200;
    try {
      const server = await startServerProcess(serverEnv({ INGESTION_CONCURRENCY: '0', SHUTDOWN_TIMEOUT_MS: '1500' }));
      running.push(server);
      const { reader, first } = await startStream(server.url, adminKey);
      server.child.kill('SIGTERM');
      const body = await readUntil(reader, first, (s) => s.endsWith('data: [DONE]\n\n'));
      expect(body).toMatch(
        /data: \{"error":\{"message":"The server is shutting down; retry the request","type":"api_error","code":"service_unavailable"\}\}\n\ndata: \[DONE\]\n\n$/,
      );
      expect(await server.exited).toEqual({ code: 0, signal: null });
      await mock.waitFor(() => mock.requests.some((r) => r.aborted));
    } finally {
      mock.options.completionTokens = 12;
    }
  }, 90_000);

  it('SIGHUP drains like SIGTERM, and a second signal during the drain does not cut it short', async () => {
    const server = await startServerProcess(serverEnv({ INGESTION_CONCURRENCY: '0', SHUTDOWN_TIMEOUT_MS: '20000' }));
    running.push(server);
    const { reader, first } = await startStream(server.url, adminKey);
    server.child.kill('SIGHUP');
    await refused(server.url);
    // What a supervisor repeating itself, or launch.mjs once npm is gone, sends: it killed the
    // process mid-shutdown (exit 143, the stream cut, the data directory's lock left behind).
    server.child.kill('SIGTERM');
    server.child.kill('SIGINT');
    const body = await readUntil(reader, first, (s) => s.endsWith('data: [DONE]\n\n'));
    expect(body.match(/"content":"w\d+ "/g)).toHaveLength(12);
    expect(body).not.toContain('"error"');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.output()).toContain('already shutting down');
    expect(existsSync(path.join(dataDir, 'ragport.lock'))).toBe(false);
  }, 90_000);

  it('a code_execution call still waiting for a slot at the deadline gets 503 "shutting down", not 500', async () => {
    const server = await startServerProcess(
      serverEnv({ INGESTION_CONCURRENCY: '0', SHUTDOWN_TIMEOUT_MS: '1500', CODE_EXECUTION_JS_CONCURRENCY: '1' }),
    );
    running.push(server);
    const run = () =>
      call(server.url, '/api/v1/agent/tool-calling', {
        method: 'POST',
        json: {
          tool_name: 'code_execution',
          parameters: {
            language: 'javascript',
            code: 'const end = Date.now() + 8000; while (Date.now() < end) {}',
            timeout: 20,
          },
        },
      });
    const running1 = run();
    await new Promise((r) => setTimeout(r, 500));
    const queued = run();
    await new Promise((r) => setTimeout(r, 300));
    server.child.kill('SIGTERM');
    const answer = await queued;
    expect(answer.status).toBe(503);
    expect(await answer.json()).toEqual({ error: 'The server is shutting down; retry the request' });
    expect((await running1).status).toBe(200);
    expect(await server.exited).toEqual({ code: 0, signal: null });
  }, 90_000);

  it('requests in flight on every connection are answered before anything closes, whichever acceptor took them', async () => {
    // The default LISTEN_ACCEPTORS (64): most connections are taken by sockets other than the HTTP
    // server's own, whose close did not wait for them, so the model and the database were closed
    // under their requests (500 "Embedding model … was closed", "Cannot use a pool after calling
    // end on the pool") and the exit cut the rest.
    const server = await startServerProcess(serverEnv({ INGESTION_CONCURRENCY: '0', SHUTDOWN_TIMEOUT_MS: '30000' }));
    running.push(server);
    const port = Number(new URL(server.url).port);
    // Local embeddings: seconds of work in all, queued on the model's threads.
    const body = (i: number) =>
      JSON.stringify({
        model: 'sentence-transformers/all-MiniLM-L6-v2',
        input: Array.from({ length: 24 }, (_, j) => `request ${i} text ${j}: a graceful stop answers what it accepted`),
      });
    // A connection of its own for each.
    const answers = Array.from(
      { length: 16 },
      (_, i) =>
        new Promise<string>((resolve) => {
          const req = httpRequest(
            {
              host: '127.0.0.1',
              port,
              path: '/api/v1/embeddings',
              method: 'POST',
              agent: false,
              headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
            },
            (res) => {
              let text = '';
              res.on('data', (chunk: Buffer) => (text += chunk.toString()));
              res.on('end', () => {
                const parsed = JSON.parse(text) as { data?: unknown[]; error?: { message?: string } };
                resolve(`${res.statusCode} ${parsed.data?.length ?? parsed.error?.message}`);
              });
              res.on('error', (error) => resolve(`cut: ${error.message}`));
            },
          );
          req.on('error', (error: NodeJS.ErrnoException) => resolve(`cut: ${error.code ?? error.message}`));
          req.end(body(i));
        }),
    );
    // Every request received and waiting for the model.
    await new Promise((resolve) => setTimeout(resolve, 500));
    server.child.kill('SIGTERM');
    expect(await Promise.all(answers)).toEqual(Array.from({ length: 16 }, () => '200 24'));
    expect(await server.exited).toEqual({ code: 0, signal: null });
  }, 120_000);

  it('a request whose headers were on their way when the stop began is served, its connection then closed', async () => {
    const server = await startServerProcess(serverEnv({ INGESTION_CONCURRENCY: '0', SHUTDOWN_TIMEOUT_MS: '30000' }));
    running.push(server);
    const port = Number(new URL(server.url).port);
    // Something in flight, so the server drains for a while.
    const busy = call(server.url, '/api/v1/embeddings', {
      method: 'POST',
      json: {
        model: 'sentence-transformers/all-MiniLM-L6-v2',
        input: Array.from({ length: 300 }, (_, i) => `text ${i}: keeps the model busy while the server drains`),
      },
    });
    const socket = connect(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    const ended = new Promise((resolve) => socket.once('close', resolve));
    socket.write(`GET /api/v1/rag/collections HTTP/1.1\r\nHost: 127.0.0.1\r\n`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    server.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 500));
    socket.write(`Authorization: Bearer ${adminKey}\r\n\r\n`);
    await ended;
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer.toLowerCase()).toContain('connection: close');
    expect(answer).toContain('"collections"');
    expect((await busy).status).toBe(200);
    expect(await server.exited).toEqual({ code: 0, signal: null });
  }, 120_000);

  it('a ?wait=true request is answered 202 at once, not held until the deadline, and the server exits', async () => {
    // No worker in this process: nothing will settle the document before the server stops.
    const server = await startServerProcess(serverEnv({ INGESTION_CONCURRENCY: '0', SHUTDOWN_TIMEOUT_MS: '20000' }));
    running.push(server);
    expect(
      (await call(server.url, '/api/v1/rag/collections', { method: 'POST', json: { name: 'waiting' } })).status,
    ).toBe(201);
    const waiting = call(server.url, '/api/v1/rag/collections/waiting/documents?wait=true&timeout=60', {
      method: 'POST',
      json: { name: 'w.txt', content: 'A document nobody will process before the server stops.' },
    });
    // Stored, so its request is past the upload and waiting for the document to settle.
    await waitUntil('the upload waits', async () => {
      const list = (await (await call(server.url, '/api/v1/rag/collections/waiting/documents')).json()) as {
        documents: unknown[];
      };
      return list.documents.length === 1;
    });
    const signalledAt = Date.now();
    server.child.kill('SIGTERM');
    const response = await waiting;
    expect(response.status).toBe(202);
    expect(await response.json()).toMatchObject({ status: 'pending' });
    expect(await server.exited).toEqual({ code: 0, signal: null });
    // The deadline is 20 s: released at the signal, not at the deadline.
    expect(Date.now() - signalledAt).toBeLessThan(10_000);
  }, 60_000);

  it('SIGINT is handled the same way', async () => {
    const server = await startServerProcess(serverEnv({ INGESTION_CONCURRENCY: '0' }));
    running.push(server);
    expect(await server.stop('SIGINT')).toEqual({ code: 0, signal: null });
    expect(server.output()).toContain('"signal":"SIGINT"');
  }, 60_000);
});

const serverUrl = process.env.TEST_DATABASE_URL;

describe.skipIf(!serverUrl)(
  'SIGTERM on npm run worker (needs TEST_DATABASE_URL: workers need a PostgreSQL server)',
  () => {
    let db: TestDatabase;
    let t: TestApp;
    beforeAll(async () => {
      db = await openTestDatabase();
      t = await startTestApp({ database: db.database, config: { ingestionConcurrency: 0 } });
      await createCollection(t, 'handover');
    });
    afterAll(async () => {
      await t.close();
      await db.close();
    });

    const worker = () =>
      spawnRagport('worker', {
        DATABASE_URL: db.url as string,
        INGESTION_CONCURRENCY: '1',
        SHUTDOWN_TIMEOUT_MS: '20000',
      });

    it('signalled while it embeds: returns its claimed job to the queue (attempt not counted) and exits 0; another worker processes it', async () => {
      const upload = await t.request('/api/v1/rag/collections/handover/documents', {
        method: 'POST',
        json: { name: 'long.txt', content: longText() },
      });
      const { id } = (await upload.json()) as { id: string };
      const first = worker();
      running.push(first);
      const job = async () =>
        (
          await queryRows<{ status: string; attempts: number; lease_owner: string | null }>(
            db.database.db,
            sql`select status, attempts, lease_owner from ingestion_jobs where document_id = ${id}`,
          )
        )[0];
      await waitUntil(
        'the worker embeds the document',
        async () => embedding(await (await t.request(`/api/v1/rag/documents/${id}`)).json()),
        { process: first },
      );
      expect(await first.stop('SIGTERM')).toEqual({ code: 0, signal: null });
      expect(await job()).toEqual({ status: 'queued', attempts: 0, lease_owner: null });
      expect(((await (await t.request(`/api/v1/rag/documents/${id}`)).json()) as { status: string }).status).toBe(
        'pending',
      );

      const second = worker();
      running.push(second);
      const doc = await waitForDocument(t, id, undefined, 120_000);
      expect(doc.status).toBe('processed');
      const [row] = await queryRows<{ chunks: number; duplicated: number }>(
        db.database.db,
        sql`select count(*)::int as chunks,
                 (count(*) - count(distinct position))::int as duplicated
          from chunks where document_id = ${id}`,
      );
      expect(row).toEqual({ chunks: doc.chunk_count, duplicated: 0 });
      expect(await job()).toMatchObject({ status: 'done', attempts: 1 });
      expect(await second.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    }, 180_000);
  },
);
