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
