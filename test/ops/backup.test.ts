/**
 * Online backup of the embedded database (`GET /api/v1/backup`): taken from a running server,
 * restored by extracting it into an empty DATA_DIR and starting ragport there.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openPglite, type Database } from '../../src/db/client.ts';
import { startTestApp } from '../support/app.ts';
import { authError, call } from '../support/http.ts';
import { startServerProcess, waitUntil, type RagportProcess } from '../support/processes.ts';
import { scratchDirs } from '../support/scratch.ts';

const run = promisify(execFile);
const migrated = async (database: Database) => {
  await database.migrate();
  return database;
};

/** The `sh` blocks of docs/operations.md's Backups section: the download, then the restore. */
function docsCommands(): [string, string] {
  const page = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
  const start = page.indexOf('\n## Backups');
  const section = page.slice(start, page.indexOf('\n## ', start + 1));
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] as string);
  expect(blocks).toHaveLength(2);
  return blocks as [string, string];
}
const scratch = scratchDirs('ragport-backup-');
const adminKey = `admin_${'b'.repeat(40)}`;
const onServer = Boolean(process.env.TEST_DATABASE_URL);

async function json<T = Record<string, unknown>>(response: Response, status: number): Promise<T> {
  const text = await response.text();
  if (response.status !== status) throw new Error(`expected ${status}, got ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

describe.skipIf(onServer)('backup of the embedded database', { timeout: 180_000 }, () => {
  let server: (RagportProcess & { url: string }) | undefined;
  let restored: (RagportProcess & { url: string }) | undefined;
  const dataDir = scratch();
  const admin = (p: string, init: Parameters<typeof call>[2] = {}) =>
    call(server?.url as string, p, { key: adminKey, ...init });

  beforeAll(async () => {
    server = await startServerProcess({ DATA_DIR: dataDir, RAGPORT_ADMIN_KEY: adminKey });
  }, 120_000);
  afterAll(async () => {
    await Promise.all([server?.stop(), restored?.stop()]);
  });

  it('is a tar.gz of the database; downloaded and restored as docs/operations.md says, it is that database', async () => {
    const reader = await json<{ key: string }>(
      await admin('/api/v1/keys', { method: 'POST', json: { name: 'reader', scopes: ['read', 'tools'] } }),
      201,
    );
    await json(await admin('/api/v1/rag/collections', { method: 'POST', json: { name: 'kept' } }), 201);
    const document = await json<{ id: string; status: string }>(
      await admin('/api/v1/rag/collections/kept/documents?wait=true', {
        method: 'POST',
        json: { name: 'llamas.md', content: 'Llamas hum to each other when they are anxious or curious.' },
      }),
      200,
    );
    expect(document.status).toBe('processed');

    // Only an admin key takes one, and not one restricted to collections; no key at all is a 401.
    expect(await call(server?.url as string, '/api/v1/backup', { key: reader.key }).then((r) => r.status)).toBe(403);
    const restricted = await json<{ key: string }>(
      await admin('/api/v1/keys', { method: 'POST', json: { name: 'r', scopes: ['admin'], collections: ['kept'] } }),
      201,
    );
    expect(await call(server?.url as string, '/api/v1/backup', { key: restricted.key }).then((r) => r.status)).toBe(
      403,
    );
    const anonymous = await call(server?.url as string, '/api/v1/backup', { key: null });
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toEqual(authError('Missing API key: send the header Authorization: Bearer <key>'));

    const backup = await admin('/api/v1/backup');
    expect(backup.status).toBe(200);
    expect(backup.headers.get('content-type')).toBe('application/gzip');
    expect(backup.headers.get('content-disposition')).toMatch(
      /^attachment; filename="ragport-backup-\d{4}-\d\d-\d\dT[\d-]+Z\.tar\.gz"$/,
    );
    expect(Number(backup.headers.get('x-ragport-backup-held-ms'))).toBeGreaterThanOrEqual(0);
    const head = Buffer.from(await backup.arrayBuffer()).subarray(0, 2);
    expect([...head]).toEqual([0x1f, 0x8b]);

    // Then as docs/operations.md says: its download command, run as written.
    const [download, restore] = docsCommands();
    const workdir = scratch();
    await run('bash', ['-euo', 'pipefail', '-c', download.replaceAll('http://localhost:8080', server?.url as string)], {
      cwd: workdir,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', RAGPORT_ADMIN_KEY: adminKey },
    });
    const archive = path.join(workdir, 'ragport-backup.tar.gz');

    // Written after the backup: not in it.
    await json(await admin('/api/v1/rag/collections', { method: 'POST', json: { name: 'later' } }), 201);

    // The archive is what system tar reads: the database directory, without the running instance's pid file.
    const { stdout: listing } = await run('tar', ['-tzf', archive]);
    const entries = listing.trim().split('\n');
    expect(entries).toContain('pg/');
    expect(entries).toContain('pg/PG_VERSION');
    expect(entries).toContain('pg/backup_label');
    expect(entries.every((e) => e.startsWith('pg/'))).toBe(true);
    expect(entries).not.toContain('pg/postmaster.pid');

    // The docs' restore: extracted into an empty directory, ragport started there.
    const restoreDir = path.join(scratch(), 'restored');
    const [extract, start] = restore
      .replaceAll('/srv/ragport/restored', restoreDir)
      .split('\n')
      .filter((line) => line.trim() !== '');
    await run('bash', ['-euo', 'pipefail', '-c', extract as string], { cwd: workdir });
    expect(existsSync(path.join(restoreDir, 'pg', 'PG_VERSION'))).toBe(true);
    expect(start).toBe(`DATA_DIR=${restoreDir} npm start`);
    restored = await startServerProcess({ DATA_DIR: restoreDir, RAGPORT_ADMIN_KEY: adminKey });
    const names = (
      await json<{ collections: { name: string; document_count: number }[] }>(
        await call(restored.url, '/api/v1/rag/collections', { key: reader.key }),
        200,
      )
    ).collections.map((c) => [c.name, c.document_count]);
    expect(names).toEqual([['kept', 1]]);
    const search = await json<{ results: { document_id: string; content: string }[] }>(
      await call(restored.url, '/api/v1/agent/tool-calling', {
        key: reader.key,
        method: 'POST',
        json: { tool_name: 'rag_search', parameters: { query: 'humming llamas', collection: 'kept' } },
      }),
      200,
    );
    expect(search.results[0]?.document_id).toBe(document.id);
    // The restored database takes writes.
    await json(
      await call(restored.url, '/api/v1/rag/collections', { key: adminKey, method: 'POST', json: { name: 'new' } }),
      201,
    );
  });

  it('one at a time: a second is a 409 while the first is read; one abandoned mid-way frees the way', async () => {
    const controller = new AbortController();
    const first = await admin('/api/v1/backup', { signal: controller.signal });
    expect(first.status).toBe(200);
    const reader = first.body?.getReader();
    await reader?.read();
    const second = await admin('/api/v1/backup');
    expect(second.status).toBe(409);
    expect(await second.json()).toMatchObject({
      error: { code: 'conflict', message: 'A backup is being taken; ask again once it has been read' },
    });
    controller.abort();
    await reader?.cancel().catch(() => undefined);
    await waitUntil('another backup taken', async () => {
      const next = await admin('/api/v1/backup');
      await next.arrayBuffer();
      return next.status === 200;
    });
  });
});

describe('backup where there is no embedded data directory', () => {
  it('answers 409 saying what to do instead; the OpenAPI document says what a 200 holds', async () => {
    const t = await startTestApp();
    try {
      const doc = (await (await fetch(`${t.url}/api/v1/openapi.json`)).json()) as {
        paths: Record<string, { get?: { responses: Record<string, { content?: Record<string, unknown> }> } }>;
      };
      expect(doc.paths['/api/v1/backup']?.get?.responses['200']?.content).toEqual({
        'application/gzip': { schema: { type: 'string', format: 'binary' } },
      });
      const response = await t.request('/api/v1/backup');
      expect(response.status).toBe(409);
      const body = (await response.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('conflict');
      expect(body.error.message).toBe(
        onServer
          ? 'This server keeps its data on a PostgreSQL server (DATABASE_URL): back that up with its own tools (pg_dump); /api/v1/backup copies the embedded database'
          : 'The embedded database runs in memory here (no data directory): there is nothing on disk to back up',
      );
    } finally {
      await t.close();
    }
  });
});

describe('a backup read whole', () => {
  it('frees the way at its last byte: asked again at once, the next is a 200, however long its thread takes to end', async () => {
    const t = await startTestApp({ database: await openPglite(path.join(scratch(), 'pg')).then(migrated) });
    // The archive's thread takes long to end, as on a busy machine (its `close` comes after that).
    const real = Object.getOwnPropertyDescriptor(Worker.prototype, 'terminate')?.value as (
      this: Worker,
    ) => Promise<number>;
    const terminate = vi.spyOn(Worker.prototype, 'terminate').mockImplementation(async function (this: Worker) {
      await new Promise<void>((resolve) => setTimeout(resolve, 2_000));
      return real.call(this);
    });
    try {
      for (let i = 0; i < 3; i++) {
        const backup = await t.request('/api/v1/backup');
        expect(backup.status).toBe(200);
        expect(Buffer.from(await backup.arrayBuffer()).subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
      }
    } finally {
      terminate.mockRestore();
      await t.close();
    }
  });
});
