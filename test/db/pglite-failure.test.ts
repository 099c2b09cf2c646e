import { describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { openPglite, queryRows } from '../../src/db/client.ts';

// Issue 13: a statement with more bind parameters than the protocol's 16-bit count broke the
// embedded database until restart — afterwards every key was "unknown" and lists came back empty,
// while /readyz still said ready. No request builds such a statement any more (filters bind one
// array); this is the net under every other path.
describe('PGlite and statements too large for its protocol', () => {
  it('refuses a statement with more bind parameters than it can carry, and keeps answering correctly', async () => {
    const broken: Error[] = [];
    const database = await openPglite(undefined, { onBroken: (error) => broken.push(error) });
    try {
      await database.migrate();
      await database.db.execute(sql`insert into api_keys (id, name, secret_hash, prefix, scopes, tier)
        values ('key_a', 'a', 'h', 'p', '{read}', 'standard')`);
      const values = Array.from({ length: 32_800 }, (_, i) => i);
      const huge = sql`select 1 as one where 1 in (${sql.join(
        values.map((v) => sql`${v}`),
        sql`, `,
      )})`;
      // Before: resolved with no rows (1 is in the list), and the session answered wrongly after.
      const refused = {
        cause: expect.objectContaining({ message: expect.stringMatching(/32800 bind parameters refused/) }),
      };
      await expect(database.db.execute(huge)).rejects.toMatchObject(refused);
      await expect(
        database.db.transaction(async (tx) => {
          await tx.execute(huge);
        }),
      ).rejects.toMatchObject(refused);
      expect(broken).toHaveLength(0);
      const rows = await queryRows<{ n: number }>(database.db, sql`select count(*)::int as n from api_keys`);
      expect(rows[0]?.n).toBe(1);
      await database.ping();
    } finally {
      await database.close();
    }
  });

  it('an ordinary SQL error is not an engine failure', async () => {
    const broken: Error[] = [];
    const database = await openPglite(undefined, { onBroken: (error) => broken.push(error) });
    try {
      await database.migrate();
      await expect(database.db.execute(sql`select * from no_such_table`)).rejects.toThrow();
      await expect(database.db.execute(sql`select 1/0`)).rejects.toThrow();
      expect(broken).toHaveLength(0);
      await database.ping();
    } finally {
      await database.close();
    }
  });
});
