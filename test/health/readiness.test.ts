import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const readiness = async () => {
  const r = await t.request('/readyz', { key: null });
  return {
    status: r.status,
    body: (await r.json()) as { status: string; checks: { database: { ok: boolean; detail: string } } },
  };
};

describe('/readyz', () => {
  // Issue 13: `select 1` answered while the embedded database refused every key.
  it('reads a real table: unready while the keys table cannot be read, ready again after', async () => {
    expect((await readiness()).status).toBe(200);
    await t.database.db.execute(sql`alter table api_keys rename to api_keys_away`);
    try {
      const down = await readiness();
      expect(down.status).toBe(503);
      expect(down.body.status).toBe('unavailable');
      expect(down.body.checks.database.ok).toBe(false);
      // The database's reason, not drizzle's `Failed query: select … params:`.
      expect(down.body.checks.database.detail).toBe('relation "api_keys" does not exist');
    } finally {
      await t.database.db.execute(sql`alter table api_keys_away rename to api_keys`);
    }
    expect((await readiness()).status).toBe(200);
  });
});
