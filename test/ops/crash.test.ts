import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { randomBase62 } from '../../src/db/ids.ts';
import { call as request, type CallInit } from '../support/http.ts';
import { startServerProcess, waitUntil, type RagportProcess } from '../support/processes.ts';
import { scratchDirs } from '../support/scratch.ts';

const adminKey = `admin_${randomBase62(40)}`;
const scratch = scratchDirs('ragport-crash-');
const running: RagportProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop('SIGKILL')));
});

const call = (url: string, pathname: string, init: CallInit = {}) => request(url, pathname, { key: adminKey, ...init });

/** A long document: embedding it keeps the worker busy for seconds. */
const longText = () =>
  Array.from({ length: 800 }, (_, i) => `Paragraph ${i} says why a crash must lose nothing at all.`).join('\n\n');

interface Doc {
  id: string;
  status: string;
  chunk_count: number;
  progress: { stage: string; chunks_embedded: number | null } | null;
}

describe('SIGKILL of the embedded server while it ingests', () => {
  it('the restart takes the data directory over and finishes the interrupted job at once, exactly once', async () => {
    const dataDir = scratch();
    // A lease far longer than the test: the job must not wait for it after the restart.
    const env = { DATA_DIR: dataDir, RAGPORT_ADMIN_KEY: adminKey, INGESTION_LEASE_MS: '600000' };
    const first = await startServerProcess({ ...env, INGESTION_CONCURRENCY: '1' });
    running.push(first);
    expect((await call(first.url, '/api/v1/rag/collections', { method: 'POST', json: { name: 'crash' } })).status).toBe(
      201,
    );
    const upload = await call(first.url, '/api/v1/rag/collections/crash/documents', {
      method: 'POST',
      json: { name: 'long.txt', content: longText() },
    });
    const { id } = (await upload.json()) as { id: string };
    const small: string[] = [];
    for (const name of ['a', 'b', 'c']) {
      const r = await call(first.url, '/api/v1/rag/collections/crash/documents', {
        method: 'POST',
        json: { name: `${name}.txt`, content: `Short note ${name} about durable queues.` },
      });
      expect(r.status).toBe(202);
      small.push(((await r.json()) as { id: string }).id);
    }
    await waitUntil('the worker embeds the long document', async () => {
      const doc = (await (await call(first.url, `/api/v1/rag/documents/${id}`)).json()) as Doc;
      return doc.progress?.stage === 'embedding' && (doc.progress.chunks_embedded ?? 0) > 0;
    });
    expect(await first.stop('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });

    // The dead process's lock is taken over; its job is taken again now, not when its lease ends.
    const second = await startServerProcess(env);
    running.push(second);
    const docs = new Map<string, Doc>();
    await waitUntil(
      'every document processed after the restart',
      async () => {
        for (const docId of [id, ...small]) {
          docs.set(docId, (await (await call(second.url, `/api/v1/rag/documents/${docId}`)).json()) as Doc);
        }
        return [...docs.values()].every((d) => d.status === 'processed');
      },
      { process: second, timeoutMs: 60_000 },
    );

    const long = docs.get(id) as Doc;
    expect(long.chunk_count).toBeGreaterThan(1);
    const collection = (await (await call(second.url, '/api/v1/rag/collections/crash')).json()) as {
      document_count: number;
      chunk_count: number;
    };
    expect(collection.document_count).toBe(4);
    expect(collection.chunk_count).toBe([...docs.values()].reduce((n, d) => n + d.chunk_count, 0));
    // One set of chunks: every chunk of the long document is found once.
    const search = await call(second.url, '/api/v1/agent/tool-calling', {
      method: 'POST',
      json: {
        tool_name: 'rag_search',
        parameters: { query: 'why a crash must lose nothing', collection: 'crash', top_k: 50, similarity_threshold: 0 },
      },
    });
    expect(search.status).toBe(200);
    const { results } = (await search.json()) as { results: { document_id: string; content: string }[] };
    const fromLong = results.filter((r) => r.document_id === id).map((r) => r.content);
    expect(fromLong.length).toBeGreaterThan(0);
    expect(new Set(fromLong).size).toBe(fromLong.length);
  }, 300_000);
});

describe('SIGKILL of the embedded server while it sends a webhook', () => {
  it('the restart sends the interrupted delivery again at once, same webhook-id, not when its lease ends', async () => {
    // A receiver that holds the first request open (the server dies with it in flight), then answers.
    const received: { id: string; at: number }[] = [];
    let hold = true;
    const receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        received.push({ id: String(req.headers['webhook-id']), at: Date.now() });
        if (!hold) res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const { port } = receiver.address() as AddressInfo;
    try {
      const env = {
        DATA_DIR: scratch(),
        RAGPORT_ADMIN_KEY: adminKey,
        WEBHOOK_SIGNING_KEY: randomBase62(40),
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        // A lease of 3 × 60 s + 5 s: far longer than the test may wait.
        WEBHOOK_TIMEOUT_MS: '60000',
      };
      const first = await startServerProcess(env);
      running.push(first);
      const hook = await call(first.url, '/api/v1/webhooks', {
        method: 'POST',
        json: { url: `http://127.0.0.1:${port}/events`, events: ['document.processed'] },
      });
      expect(hook.status).toBe(201);
      expect(
        (await call(first.url, '/api/v1/rag/collections', { method: 'POST', json: { name: 'hooks' } })).status,
      ).toBe(201);
      const upload = await call(first.url, '/api/v1/rag/collections/hooks/documents', {
        method: 'POST',
        json: { name: 'note.txt', content: 'A delivery in flight when the server dies.' },
      });
      expect(upload.status).toBe(202);
      await waitUntil('the delivery in flight', async () => received.length > 0, { process: first, timeoutMs: 60_000 });
      expect(await first.stop('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });
      hold = false;

      const restarted = Date.now();
      const second = await startServerProcess(env);
      running.push(second);
      await waitUntil('the delivery sent again', async () => received.length > 1, {
        process: second,
        timeoutMs: 60_000,
      });
      expect(received[1]?.id).toBe(received[0]?.id);
      // Within the start and one poll of the sender, far from the 185 s lease.
      expect((received[1]?.at ?? Infinity) - restarted).toBeLessThan(60_000);
      const { id: hookId } = (await hook.json()) as { id: string };
      await waitUntil('the log says delivered', async () => {
        const log = (await (await call(second.url, `/api/v1/webhooks/${hookId}/deliveries`)).json()) as {
          deliveries: { status: string; attempts: number }[];
        };
        return log.deliveries[0]?.status === 'delivered' && log.deliveries[0].attempts === 2;
      });
    } finally {
      receiver.closeAllConnections();
      receiver.close();
    }
  }, 300_000);
});
