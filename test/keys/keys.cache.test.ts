import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { loadConfig } from '../../src/config.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { fakeClock } from '../support/clock.ts';
import { waitUntil } from '../support/processes.ts';

const ttlMs = loadConfig({}).authCacheTtlMs;
const serverUrl = process.env.TEST_DATABASE_URL;

/**
 * Every key change made through ragport applies to the next request, on the instance that made it
 * (`writer`) and on any other one (`reader`), although keys are served from memory.
 */
function changesApplyAtOnce(
  instances: () => { writer: TestApp; reader: TestApp; clock: ReturnType<typeof fakeClock> },
) {
  const status = async (t: TestApp, key: string, path = '/api/v1/models') => (await t.request(path, { key })).status;

  it('revocation', async () => {
    const { writer, reader } = instances();
    const k = await writer.createKey({ name: 'revoked', scopes: ['read'] });
    expect(await status(reader, k.key)).toBe(200);
    expect((await writer.request(`/api/v1/keys/${k.id}`, { method: 'DELETE' })).status).toBe(200);
    expect(await status(reader, k.key)).toBe(401);
    expect(await status(writer, k.key)).toBe(401);
  });

  it('rotation', async () => {
    const { writer, reader } = instances();
    const k = await writer.createKey({ name: 'rotated', scopes: ['read'] });
    expect(await status(reader, k.key)).toBe(200);
    const rotated = (await (await writer.request(`/api/v1/keys/${k.id}/rotate`, { method: 'POST' })).json()) as {
      key: string;
    };
    expect(await status(reader, k.key)).toBe(401);
    expect(await status(reader, rotated.key)).toBe(200);
  });

  it('scope change', async () => {
    const { writer, reader } = instances();
    const k = await writer.createKey({ name: 'rescoped', scopes: ['read'] });
    expect(await status(reader, k.key)).toBe(200);
    const patched = await writer.request(`/api/v1/keys/${k.id}`, { method: 'PATCH', json: { scopes: ['chat'] } });
    expect(patched.status).toBe(200);
    expect(await status(reader, k.key, '/api/v1/rag/collections')).toBe(403);
  });

  it('expiry, set later and reached', async () => {
    const { writer, reader, clock } = instances();
    const k = await writer.createKey({ name: 'expiring', scopes: ['read'] });
    expect(await status(reader, k.key)).toBe(200);
    const expiresAt = new Date(clock() + 1_000).toISOString();
    expect(
      (await writer.request(`/api/v1/keys/${k.id}`, { method: 'PATCH', json: { expires_at: expiresAt } })).status,
    ).toBe(200);
    expect(await status(reader, k.key)).toBe(200);
    clock.advance(1_000);
    expect(await status(reader, k.key)).toBe(401);
  });

  it('a hand edit of the table, which nobody announces, is served from memory for at most AUTH_CACHE_TTL_MS', async () => {
    const { writer, reader, clock } = instances();
    const k = await writer.createKey({ name: 'by-hand', scopes: ['read'] });
    expect(await status(reader, k.key)).toBe(200);
    await writer.database.db.execute(sql`update api_keys set revoked_at = now() where id = ${k.id}`);
    // Still remembered: this request did not read the database.
    expect(await status(reader, k.key)).toBe(200);
    clock.advance(ttlMs);
    expect(await status(reader, k.key)).toBe(401);
  });
}

describe('API keys served from memory (one instance)', () => {
  const clock = fakeClock();
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await openTestDatabase();
    // On a server, the instance listens for key changes through its own connection.
    t = await startTestApp({ clock, database: db.database, config: { databaseUrl: db.url } });
  });
  afterAll(async () => {
    await t?.close();
    await db?.close();
  });
  changesApplyAtOnce(() => ({ writer: t, reader: t, clock }));
});

describe.skipIf(!serverUrl)('API keys served from memory (two instances on one server)', () => {
  const clock = fakeClock();
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  beforeAll(async () => {
    db = await openTestDatabase();
    const options = { clock, database: db.database, config: { databaseUrl: db.url } };
    a = await startTestApp(options);
    b = await startTestApp({ ...options, config: { ...options.config, adminKey: a.adminKey } });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.close();
  });
  changesApplyAtOnce(() => ({ writer: a, reader: b, clock }));

  it('while the change listener is down, every request reads its key; once back, memory serves again', async () => {
    const k = await a.createKey({ name: 'listener', scopes: ['read'] });
    expect((await b.request('/api/v1/models', { key: k.key })).status).toBe(200);
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    try {
      const listeners = async () =>
        (
          await admin.query<{ n: number }>(
            `select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = $1`,
            ['ragport-key-changes'],
          )
        ).rows[0]?.n ?? 0;
      expect(await listeners()).toBe(2);
      await admin.query(
        `select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and application_name = $1`,
        ['ragport-key-changes'],
      );
      // The terminated backends' sockets close; give the instances a moment to see it.
      await new Promise((resolve) => setTimeout(resolve, 200));
      // The hand edit is seen at once: nothing is remembered while changes could be missed.
      await admin.query(`update api_keys set scopes = '{chat}' where id = $1`, [k.id]);
      expect((await b.request('/api/v1/rag/collections', { key: k.key })).status).toBe(403);
      await waitUntil('listeners back', async () => (await listeners()) === 2, { timeoutMs: 10_000 });
    } finally {
      await admin.end();
    }
    // Reconnected: a change through A reaches B at once again.
    expect((await a.request(`/api/v1/keys/${k.id}`, { method: 'DELETE' })).status).toBe(200);
    expect((await b.request('/api/v1/models', { key: k.key })).status).toBe(401);
  });
});
