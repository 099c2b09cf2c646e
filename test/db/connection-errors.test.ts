import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { sql } from '../../src/db/orm.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres, queryRows, type Database } from '../../src/db/client.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';

/**
 * A backend terminated while a transaction holds its connection between two statements (a server
 * restart, a failover, `pg_terminate_backend`): pg's pool had no listener on a checked-out
 * connection, and the 'error' it emitted ended the process. A helper's probe crashed 3 of 4
 * server instances that way under `rag_search` load.
 */
describe.skipIf(!process.env.TEST_DATABASE_URL)('a connection lost inside a transaction', () => {
  let t: TestDatabase;
  let database: Database;
  let admin: pg.Client;
  const reported: Error[] = [];
  beforeAll(async () => {
    t = await openTestDatabase();
    database = openPostgres({ url: t.url as string, poolSize: 3, onPoolError: (error) => reported.push(error) });
    admin = new pg.Client({ connectionString: t.url as string });
    await admin.connect();
  });
  afterAll(async () => {
    await admin.end();
    await database.close();
    await t.close();
  });

  it('fails that transaction, is reported once, and the pool goes on', async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', onUncaught);
    try {
      const transaction = database.db.transaction(async (tx) => {
        const [row] = await queryRows<{ pid: number }>(tx, sql`select pg_backend_pid() as pid`);
        await admin.query('select pg_terminate_backend($1)', [row?.pid]);
        // The connection's error arrives while no statement runs on it.
        for (let i = 0; i < 100 && reported.length === 0; i++) await sleep(20);
        await tx.execute(sql`select 1`);
      });
      const failure: unknown = await transaction.then(
        () => undefined,
        (error: unknown) => error,
      );
      // drizzle's rollback fails too; the connection's error is in the chain of causes (which the
      // error handler reads to answer 503 "Database unavailable").
      const chain: string[] = [];
      for (let e = failure; e instanceof Error; e = e.cause) chain.push(e.message);
      expect(chain.join(' / ')).toMatch(/connection error|terminat/i);
      expect(uncaught).toEqual([]);
      expect(reported).toHaveLength(1);
      expect(String(reported[0]?.message)).toMatch(/terminat/i);
      // The broken connection was discarded: every connection of the pool works.
      const answers = await Promise.all(
        [1, 2, 3].map(() => queryRows<{ one: number }>(database.db, sql`select 1 as one`)),
      );
      expect(answers.map((rows) => rows[0]?.one)).toEqual([1, 1, 1]);
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });
});
