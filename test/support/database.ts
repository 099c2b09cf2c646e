import pg from 'pg';
import { randomBase62 } from '../../src/db/ids.ts';
import { openPglite, openPostgres, type Database } from '../../src/db/client.ts';

export interface TestDatabase {
  database: Database;
  /** A connection URL other processes can use (PostgreSQL server only). */
  url: string | undefined;
  close(): Promise<void>;
}

/**
 * PGlite in memory by default; with TEST_DATABASE_URL, a fresh database on that PostgreSQL
 * server for each caller, dropped afterwards, so test files never see each other's rows.
 */
export async function openTestDatabase(): Promise<TestDatabase> {
  const serverUrl = process.env.TEST_DATABASE_URL;
  if (serverUrl === undefined || serverUrl === '') {
    const database = await openPglite();
    await database.migrate();
    return { database, url: undefined, close: () => database.close() };
  }
  const name = `ragport_t_${randomBase62(10).toLowerCase()}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const database = openPostgres({ url: url.toString(), poolSize: 5 });
  await database.migrate();
  return {
    database,
    url: url.toString(),
    close: async () => {
      await database.close();
      const dropper = new pg.Client({ connectionString: serverUrl });
      await dropper.connect();
      await dropper.query(`drop database if exists ${name} with (force)`);
      await dropper.end();
    },
  };
}
