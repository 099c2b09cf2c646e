import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';
import { waitForDocument } from '../support/documents.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';
import { spawnRagport } from '../support/processes.ts';
import { scratchDirs } from '../support/scratch.ts';

const serverUrl = process.env.TEST_DATABASE_URL;
const scratch = scratchDirs('ragport-worker-upstream-');

describe.skipIf(!serverUrl)(
  'npm run worker on a collection with an upstream embedding model (needs TEST_DATABASE_URL)',
  () => {
    let db: TestDatabase;
    let t: TestApp;
    let mock: MockUpstream;
    const provider = () => ({ name: 'mock', base_url: mock.url, models: [], embedding_models: ['mock-embed'] });

    beforeAll(async () => {
      mock = await startMockUpstream({ models: ['mock-embed'], embeddingDimensions: 16, embeddingKind: 'words' });
      db = await openTestDatabase();
      // The API ingests nothing itself: the standalone worker must embed through its own gateway.
      t = await startTestApp({
        database: db.database,
        config: { ingestionConcurrency: 0 },
        gateway: { providers: [provider()] },
      });
    });
    afterAll(async () => {
      await t.close();
      await db.close();
      await mock.close();
    });

    it('embeds the chunks through the providers of RAGPORT_CONFIG and counts them against the uploader', async () => {
      const created = await t.request('/api/v1/rag/collections', {
        method: 'POST',
        json: { name: 'remote', embedding_model: 'mock-embed' },
      });
      expect(created.status).toBe(201);
      const uploader = await t.createKey({ name: 'uploader', scopes: ['write'] });
      const upload = await t.request('/api/v1/rag/collections/remote/documents', {
        method: 'POST',
        key: uploader.key,
        json: { name: 'note.txt', content: 'Standalone workers embed upstream as the server does.' },
      });
      const { id } = (await upload.json()) as { id: string };

      const config = path.join(scratch(), 'ragport.json');
      writeFileSync(config, JSON.stringify({ providers: [provider()] }));
      mock.reset();
      const worker = spawnRagport('worker', {
        DATABASE_URL: db.url as string,
        RAGPORT_CONFIG: config,
        INGESTION_CONCURRENCY: '1',
      });
      try {
        const doc = await waitForDocument(t, id, undefined, 120_000);
        expect(doc.status, doc.error ?? worker.output()).toBe('processed');
      } finally {
        // A graceful stop writes the worker's usage counts.
        expect(await worker.stop('SIGTERM')).toEqual({ code: 0, signal: null });
      }
      const sent = mock.requests.filter((r) => r.path === '/v1/embeddings');
      expect(sent.map((r) => r.body?.input)).toEqual([[expect.stringContaining('Standalone workers embed upstream')]]);
      const reported = (JSON.parse(sent[0]?.sent ?? '{}') as { usage: { prompt_tokens: number } }).usage;
      const usage = await queryRows<{ model: string; prompt_tokens: string }>(
        db.database.db,
        sql`select model, prompt_tokens from usage_daily where key_id = ${uploader.id}`,
      );
      expect(usage.map((r) => [r.model, Number(r.prompt_tokens)])).toEqual([['mock-embed', reported.prompt_tokens]]);
    }, 180_000);
  },
);
