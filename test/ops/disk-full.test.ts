import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mayWrite, watchDisk } from '../../src/db/disk-guard.ts';
import { randomBase62 } from '../../src/db/ids.ts';
import { call as request } from '../support/http.ts';
import { spawnRagport, startServerProcess, waitUntil, type RagportProcess } from '../support/processes.ts';

describe('which statements may write', () => {
  it('reads pass, anything that may change a row or take a row lock does not', () => {
    for (const sql of [
      'select 1',
      '  SELECT * from documents',
      'with x as (select 1) select * from x',
      'show work_mem',
    ])
      expect(mayWrite(sql), sql).toBe(false);
    for (const sql of [
      'insert into t values (1)',
      'update t set a = 1',
      'delete from t',
      'with gone as (delete from t returning id) select * from gone',
      'select * from jobs for update skip locked',
      "select nextval('s')",
      'select * into copy from t',
      "select pg_backup_start('ragport', true)",
      "select pg_create_physical_replication_slot('s', true, false)",
      'create table t (a int)',
      'begin',
    ])
      expect(mayWrite(sql), sql).toBe(true);
    // How space comes back is never refused.
    for (const sql of ['vacuum (analyze) chunks', 'analyze', 'checkpoint']) expect(mayWrite(sql), sql).toBe(false);
  });

  it('a large write is weighed before it starts: it may not eat into the margin', () => {
    const guard = watchDisk(tmpdir(), 2 ** 20);
    expect(guard.shortage()).toBeUndefined();
    const free = statfsSync(tmpdir());
    const tooMuch = (Number(free.bavail) * Number(free.bsize)) / 2;
    expect(guard.shortage(tooMuch)?.message).toMatch(
      /MB free: a write of \d+ MB would leave less than the 1 MB it keeps free/,
    );
  });
});

/**
 * The embedded database on a small real disk (a tmpfs, so this needs root): PGlite that meets
 * ENOSPC zero-filling a WAL segment spins for good and every request hung (3 of 3 in a probe).
 * Below DATA_DIR_MIN_FREE_MB writes are refused before they reach it.
 */
const root = process.getuid?.() === 0;
let mountPoint: string | undefined;
const mounted = () => {
  if (!root) return false;
  const dir = mkdtempSync(path.join(tmpdir(), 'ragport-small-disk-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=128m', 'tmpfs', dir]);
    mountPoint = dir;
    return true;
  } catch {
    rmSync(dir, { recursive: true, force: true });
    return false;
  }
};

describe.skipIf(!mounted())('a full disk under the embedded database', () => {
  const adminKey = `admin_${randomBase62(40)}`;
  const running: RagportProcess[] = [];
  let dataDir: string;
  beforeAll(() => {
    dataDir = path.join(mountPoint as string, 'data');
  });
  afterAll(async () => {
    for (const p of running) await p.stop('SIGKILL');
    execFileSync('umount', ['-l', mountPoint as string]);
    rmSync(mountPoint as string, { recursive: true, force: true });
  });
  const call = (url: string, route: string, init: Parameters<typeof request>[2] = {}) =>
    request(url, route, { key: adminKey, ...init, signal: AbortSignal.timeout(20_000) });

  it('refuses writes with 503 and is not ready, serves reads, and takes writes again once space is freed', async () => {
    const env = {
      DATA_DIR: dataDir,
      RAGPORT_ADMIN_KEY: adminKey,
      INGESTION_CONCURRENCY: '0',
      DATA_DIR_MIN_FREE_MB: '40',
    };
    const server = await startServerProcess(env);
    running.push(server);
    const port = Number(new URL(server.url).port);
    expect((await call(server.url, '/api/v1/rag/collections', { method: 'POST', json: { name: 'fill' } })).status).toBe(
      201,
    );
    const accepted: string[] = [];
    let refusal: Response | undefined;
    // ~1 MB documents until refused: every request answers, none hangs.
    const content = 'word '.repeat(200_000);
    for (let i = 0; i < 200 && refusal === undefined; i++) {
      const response = await call(server.url, '/api/v1/rag/collections/fill/documents', {
        method: 'POST',
        json: { name: `doc-${i}.txt`, content: `${i} ${content}` },
      });
      if (response.status === 202) accepted.push(((await response.json()) as { id: string }).id);
      else refusal = response;
    }
    expect(refusal?.status).toBe(503);
    expect(await refusal?.json()).toEqual({
      error: 'The database is out of disk space: nothing was written; retry once space is freed',
    });
    expect(accepted.length).toBeGreaterThan(0);
    const ready = await call(server.url, '/readyz', { key: null });
    expect(ready.status).toBe(503);
    expect(JSON.stringify(await ready.json())).toMatch(/MB free, less than the 40 MB it keeps free/);
    // Reads go on.
    const list = await call(server.url, '/api/v1/rag/collections/fill/documents?page_size=100');
    expect(list.status).toBe(200);
    expect(((await list.json()) as { total: number }).total).toBe(accepted.length);

    // More room: writes again, without a restart.
    execFileSync('mount', ['-o', 'remount,size=256m', mountPoint as string]);
    await waitUntil(
      'writes taken again',
      async () => (await call(server.url, '/readyz', { key: null })).status === 200,
    );
    const after = await call(server.url, '/api/v1/rag/collections/fill/documents', {
      method: 'POST',
      json: { name: 'after.txt', content: 'room again' },
    });
    expect(after.status).toBe(202);
    expect(await server.stop('SIGTERM')).toEqual({ code: 0, signal: null });

    // Short of the margin but above the floor it opens: not ready, reads served, writes refused,
    // so a disk that holds only ragport can be read and emptied (it refused to start, for good).
    const short = spawnRagport('server', { ...env, PORT: String(port), DATA_DIR_MIN_FREE_MB: '100000' });
    running.push(short);
    const url = `http://127.0.0.1:${port}`;
    await waitUntil(
      'the short server to listen',
      async () => (await fetch(`${url}/healthz`).catch(() => null))?.status === 200,
    );
    expect((await call(url, '/readyz', { key: null })).status).toBe(503);
    expect((await call(url, '/api/v1/rag/collections/fill/documents?page_size=1')).status).toBe(200);
    expect(
      (
        await call(url, '/api/v1/rag/collections/fill/documents', {
          method: 'POST',
          json: { name: 'no.txt', content: 'x' },
        })
      ).status,
    ).toBe(503);
    expect(await short.stop('SIGTERM')).toEqual({ code: 0, signal: null });

    // Too little room to open at all: one sentence, not PGlite's "failed to initialize properly".
    const free = statfsSync(mountPoint as string);
    const filler = path.join(mountPoint as string, 'filler');
    execFileSync('fallocate', ['-l', String(Number(free.bavail) * Number(free.bsize) - 16 * 2 ** 20), filler]);
    try {
      const refused = spawnRagport('server', { ...env, PORT: String(port) });
      running.push(refused);
      expect(await refused.exited).toEqual({ code: 1, signal: null });
      expect(refused.output()).toMatch(
        /ragport failed to start: the embedded database's disk has 1\d MB free, less than the 32 MB it needs to open/,
      );
    } finally {
      rmSync(filler, { force: true });
    }
  }, 240_000);

  it('a backup begun above the margin ends when the disk falls below it meanwhile', async () => {
    const env = {
      DATA_DIR: path.join(mountPoint as string, 'data-backup'),
      RAGPORT_ADMIN_KEY: adminKey,
      INGESTION_CONCURRENCY: '0',
      DATA_DIR_MIN_FREE_MB: '48',
    };
    const server = await startServerProcess(env);
    running.push(server);
    const download = await call(server.url, '/api/v1/backup');
    expect(download.status).toBe(200);
    const reader = (download.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    // While it is read, the disk falls between the floor the database opens at (32 MB) and the
    // margin writes keep (48 MB): backup mode must still end, and its log be let go.
    const free = statfsSync(mountPoint as string);
    const filler = path.join(mountPoint as string, 'filler-backup');
    execFileSync('fallocate', ['-l', String(Number(free.bavail) * Number(free.bsize) - 40 * 2 ** 20), filler]);
    try {
      let bytes = 0;
      for (let piece = await reader.read(); !piece.done; piece = await reader.read()) bytes += piece.value.length;
      expect(bytes).toBeGreaterThan(0);
      await waitUntil('the backup to end', async () => /"msg":"backup read"/.test(server.output()), {
        process: server,
      });
      // Ended, not left holding backup mode and the log: a second backup is not told to wait,
      // and nothing says it could not end.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(server.output()).not.toMatch(/could not leave backup mode/);
    } finally {
      rmSync(filler, { force: true });
    }
    const again = await call(server.url, '/api/v1/backup');
    expect(again.status).toBe(200);
    await again.arrayBuffer();
    expect(server.output()).not.toMatch(/could not leave backup mode/);
    expect(await server.stop('SIGTERM')).toEqual({ code: 0, signal: null });
  }, 120_000);
});
