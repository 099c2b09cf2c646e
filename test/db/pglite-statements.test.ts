/**
 * Issue 14: on the embedded database every statement text is parsed once and then run by name
 * (src/db/pglite-statements.ts). What must hold: results and parameter types exactly as PGlite's
 * own `query` gives them, the session's prepared statements bounded, errors with their PostgreSQL
 * fields and the session healthy after them, and a kept statement whose columns DDL changed
 * prepared afresh instead of failing; a statement marked GENERIC_PLAN run on its generic plan, the
 * session's own plan mode untouched.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { openPglite, queryRows, type Database } from '../../src/db/client.ts';
import { isUniqueViolation } from '../../src/db/errors.ts';
import { GENERIC_PLAN } from '../../src/db/plan-hint.ts';

let database: Database;

beforeAll(async () => {
  database = await openPglite();
  await database.db.execute(sql`create extension if not exists vector`);
  await database.db.execute(
    sql`create table p (id bigint primary key, name text, tags text[], score float8, doc jsonb, raw bytea, v vector(3))`,
  );
});
afterAll(async () => {
  await database.close();
});

const prepared = async () =>
  (
    await queryRows<{ name: string; statement: string }>(
      database.db,
      sql`select name, statement from pg_prepared_statements`,
    )
  ).filter((s) => !s.statement.includes('pg_prepared_statements'));

describe('named prepared statements on the embedded database', () => {
  it('runs a statement by name from its second run on, with every parameter type intact', async () => {
    const insert = (id: number, name: string | null) =>
      database.db.execute(
        sql`insert into p values (${id}, ${name}, ${sql.param(['a', 'b,c', 'd"e'])}::text[], ${id / 3},
              ${JSON.stringify({ id, nested: { ok: true } })}::jsonb, ${new Uint8Array([0, 1, 255, id])},
              ${`[${id},0.5,-1]`}::vector)`,
      );
    for (let id = 1; id <= 8; id++) await insert(id, id % 2 === 0 ? null : `name ${id}`);
    const inserts = (await prepared()).filter((s) => s.statement.startsWith('insert into p'));
    // Eight runs, one prepared statement.
    expect(inserts).toHaveLength(1);

    const select = (ids: number[]) =>
      queryRows<{
        id: string;
        name: string | null;
        tags: string[];
        score: number;
        doc: unknown;
        raw: Uint8Array;
        v: string;
      }>(
        database.db,
        sql`select id::text, name, tags, score, doc, raw, v::text from p where id = any(${sql.param(ids)}::bigint[]) order by id`,
      );
    for (let round = 0; round < 8; round++) {
      // Past PostgreSQL's five custom plans, where the plan cache may switch to the generic one.
      const rows = await select([2, 3, 7 - (round % 3)]);
      expect(rows.map((r) => r.id)).toEqual(['2', '3', String(7 - (round % 3))].sort());
    }
    const [two, three] = await select([2, 3]);
    expect(two).toMatchObject({
      id: '2',
      name: null,
      tags: ['a', 'b,c', 'd"e'],
      doc: { id: 2, nested: { ok: true } },
      v: '[2,0.5,-1]',
    });
    expect(two?.score).toBeCloseTo(2 / 3, 12);
    expect(Array.from(two?.raw ?? [])).toEqual([0, 1, 255, 2]);
    expect(three?.name).toBe('name 3');
    expect((await prepared()).filter((s) => s.statement.startsWith('select id::text'))).toHaveLength(1);
  });

  it('keeps a bounded number of statements, closing the least recently used', async () => {
    // 150 distinct texts (a literal makes each unique); the session may keep at most 100.
    for (let i = 0; i < 150; i++) await database.db.execute(sql.raw(`select ${i} as n_${i}`));
    const kept = await prepared();
    expect(kept.length).toBeLessThanOrEqual(100);
    expect(kept.some((s) => s.statement === 'select 149 as n_149')).toBe(true);
    expect(kept.some((s) => s.statement === 'select 0 as n_0')).toBe(false);
    // A closed statement's text is prepared again when it comes back.
    const [row] = await queryRows<{ n_0: number }>(database.db, sql.raw('select 0 as n_0'));
    expect(row?.n_0).toBe(0);
  });

  it('reports errors with their PostgreSQL fields and stays healthy after them', async () => {
    const insert = (id: number) => database.db.execute(sql`insert into p (id, name) values (${id}, 'dup')`);
    await insert(100);
    for (let attempt = 0; attempt < 3; attempt++) {
      const error = await insert(100).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isUniqueViolation(error)).toBe(true);
    }
    // A statement that does not parse is not kept, and the next one runs.
    await expect(database.db.execute(sql.raw('selec 1'))).rejects.toMatchObject({ cause: { code: '42601' } });
    const [row] = await queryRows<{ n: number }>(database.db, sql`select count(*)::int as n from p where name = 'dup'`);
    expect(row?.n).toBe(1);
    // Inside a transaction a failed statement still aborts it, and nothing of it remains.
    await expect(
      database.db.transaction(async (tx) => {
        await tx.execute(sql`insert into p (id, name) values (${101}, 'dup')`);
        await tx.execute(sql`insert into p (id, name) values (${100}, 'dup')`);
      }),
    ).rejects.toBeDefined();
    const [after] = await queryRows<{ n: number }>(
      database.db,
      sql`select count(*)::int as n from p where name = 'dup'`,
    );
    expect(after?.n).toBe(1);
  });

  it('prepares a kept statement afresh when DDL changed its columns', async () => {
    await database.db.execute(sql`create table d (id int)`);
    await database.db.execute(sql`insert into d values (1)`);
    const all = () => queryRows<Record<string, unknown>>(database.db, sql`select * from d`);
    expect(await all()).toEqual([{ id: 1 }]);
    await database.db.execute(sql`alter table d add column extra text default 'x'`);
    // Without the fresh prepare: "cached plan must not change result type".
    expect(await all()).toEqual([{ id: 1, extra: 'x' }]);
  });

  it('runs texts too long to keep without keeping them', async () => {
    const long = `select '${'x'.repeat(20_000)}'::text as long`;
    const [row] = await queryRows<{ long: string }>(database.db, sql.raw(long));
    expect(row?.long).toHaveLength(20_000);
    expect((await prepared()).some((s) => s.statement.length > 16_384)).toBe(false);
  });

  it('runs a statement marked GENERIC_PLAN on its generic plan, and only that statement', async () => {
    const mode = (marked: boolean) =>
      queryRows<{ mode: string }>(
        database.db,
        sql.raw(`${marked ? GENERIC_PLAN : ''}select current_setting('plan_cache_mode') as mode, 1 as marked`),
      ).then((rows) => rows[0]?.mode);
    expect(await mode(true)).toBe('force_generic_plan');
    // Set for that statement alone: the next one runs with the session's own setting.
    expect(await mode(false)).toBe('auto');

    // PostgreSQL's counters of the plans each prepared statement ran with.
    const plans = async (fragment: string) =>
      (
        await queryRows<{ generic: number; custom: number }>(
          database.db,
          sql`select generic_plans::int as generic, custom_plans::int as custom from pg_prepared_statements
              where statement like ${`%${fragment}%`} and statement not like '%pg_prepared_statements%'`,
        )
      )[0];
    for (let id = 1; id <= 3; id++) {
      await queryRows(
        database.db,
        sql`${sql.raw(GENERIC_PLAN)}select id from p where id = ${id} and 'generic' = 'generic'`,
      );
      await queryRows(database.db, sql`select id from p where id = ${id} and 'custom' = 'custom'`);
    }
    expect(await plans(`'generic' = 'generic'`)).toEqual({ generic: 3, custom: 0 });
    // Unmarked, PostgreSQL plans each of the first five runs for its values.
    expect(await plans(`'custom' = 'custom'`)).toEqual({ generic: 0, custom: 3 });
  });

  it('resets the plan mode after a marked statement fails, and leaves it alone inside a transaction', async () => {
    await expect(queryRows(database.db, sql`${sql.raw(GENERIC_PLAN)}select 1 / ${0}::int as y`)).rejects.toMatchObject({
      cause: { code: '22012' },
    });
    const [after] = await queryRows<{ mode: string }>(
      database.db,
      sql`select current_setting('plan_cache_mode') as mode, 'after' as at`,
    );
    expect(after?.mode).toBe('auto');
    // A SET inside a transaction would be undone by its rollback, reset included.
    const inside = await database.db.transaction(async (tx) =>
      queryRows<{ mode: string }>(tx, sql.raw(`${GENERIC_PLAN}select current_setting('plan_cache_mode') as mode`)),
    );
    expect(inside[0]?.mode).toBe('auto');
  });
});
