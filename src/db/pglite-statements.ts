/**
 * Named prepared statements for the embedded PGlite. PGlite's own `query` sends every statement as
 * an unnamed one in six calls into the engine (parse, describe, bind, describe, execute, sync), so
 * each run parses and analyses the text again. Here a statement's text is parsed once under a
 * name; later runs send bind, describe, execute and sync in one call. Measured on 11,450 SciFact
 * chunks: `rag_search` hybrid end to end p50 / p99 18.0 / 27.6 → 16.0 / 24.6 ms (docs/operations.md).
 *
 * PostgreSQL's plan cache still decides per run between a custom plan and the generic one, as for
 * any prepared statement (`plan_cache_mode`), except for a statement marked GENERIC_PLAN
 * (plan-hint.ts), which runs on its generic plan. Runs on the database's thread (pglite.worker.ts).
 */
import { parse, protocol, type PGlite } from '@electric-sql/pglite';
import { GENERIC_PLAN } from './plan-hint.ts';

type Options = Parameters<PGlite['query']>[2];
type Results = Awaited<ReturnType<PGlite['query']>>;

/** The PGlite internals this module relies on (both present in 0.4; checked at start). */
interface PgliteInternals {
  _runExclusiveQuery<T>(fn: () => Promise<T>): Promise<T>;
}

/** SQLSTATE 0A000 with this message: the statement's result columns changed under it (DDL). */
const RESULT_TYPE_CHANGED = 'cached plan must not change result type';

/** Texts longer than this (migrations, bulk inserts with inlined values) run unnamed, as before. */
const MAX_TEXT = 16_384;

const serialize = protocol.serialize;
const FORCE_GENERIC = serialize.query('set plan_cache_mode = force_generic_plan');
const RESET_PLAN_MODE = serialize.query('reset plan_cache_mode');

function concat(parts: Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

export interface PreparedStatements {
  /** Runs `text` as PGlite's `query` would, through a named statement. */
  query(text: string, params: readonly unknown[], options: Options, inTransaction: boolean): Promise<Results>;
}

/** Keeps at most `capacity` statements, least recently used closed first. */
export function createPreparedStatements(pg: PGlite, capacity = 100): PreparedStatements {
  const internals = pg as unknown as PgliteInternals;
  if (typeof internals._runExclusiveQuery !== 'function') {
    throw new Error('this PGlite version has no _runExclusiveQuery: prepared statements need it');
  }
  /** Text → name and parameter types, in least-recently-used order (a Map keeps insertion order). */
  const statements = new Map<string, { name: string; types: number[] }>();
  let counter = 0;

  const close = (name: string) =>
    pg.execProtocolStream(concat([serialize.close({ type: 'S', name }), serialize.sync()]), { syncToFs: false });

  const prepare = async (text: string) => {
    const name = `ragport_${++counter}`;
    const messages = await pg.execProtocolStream(
      concat([serialize.parse({ name, text }), serialize.describe({ type: 'S', name }), serialize.sync()]),
      { syncToFs: false },
    );
    const entry = { name, types: parse.parseDescribeStatementResults(messages) };
    statements.set(text, entry);
    while (statements.size > capacity) {
      const [oldest, old] = statements.entries().next().value as [string, { name: string }];
      statements.delete(oldest);
      await close(old.name);
    }
    return entry;
  };

  /**
   * A statement marked GENERIC_PLAN runs with `plan_cache_mode = force_generic_plan` for itself
   * alone: set and reset around it in the same call into the engine (the reset comes after the
   * statement's Sync, so it runs whether the statement failed or not). Not inside a transaction,
   * where a rollback would undo the reset with the rest.
   */
  const run = async (text: string, params: readonly unknown[], options: Options, inTransaction: boolean) => {
    let entry = statements.get(text);
    if (entry) {
      statements.delete(text);
      statements.set(text, entry);
    } else {
      entry = await prepare(text);
    }
    const types = entry.types;
    const values = params.map((value, i) => {
      if (value === null || value === undefined) return null;
      const type = types[i] as number;
      const serializer = options?.serializers?.[type] ?? pg.serializers[type];
      // As PGlite's own query: a value of a type without a serializer is sent as its string form.
      return serializer ? serializer(value) : (value as { toString(): string }).toString();
    });
    const generic = !inTransaction && text.startsWith(GENERIC_PLAN);
    const statement = [
      serialize.bind({ statement: entry.name, values }),
      serialize.describe({ type: 'P' }),
      serialize.execute({}),
      serialize.sync(),
    ];
    const messages = await pg.execProtocolStream(
      concat(generic ? [FORCE_GENERIC, ...statement, RESET_PLAN_MODE] : statement),
      { syncToFs: false },
    );
    // With the plan mode around it, the statement's result comes between the SET's and the RESET's.
    return parse.parseResults(messages, pg.parsers, options)[generic ? 1 : 0] as Results;
  };

  return {
    query: (text, params, options, inTransaction) => {
      if (text.length > MAX_TEXT) return pg.query(text, params as unknown[], options);
      return internals._runExclusiveQuery(async () => {
        let result: Results;
        try {
          result = await run(text, params, options, inTransaction);
        } catch (error) {
          if (!(error instanceof Error && error.message === RESULT_TYPE_CHANGED)) throw annotate(error, text, params);
          // DDL changed the columns under a kept statement: prepare it afresh. Inside a
          // transaction the error has already aborted it, so it is the caller's to see.
          const stale = statements.get(text);
          statements.delete(text);
          if (stale) await close(stale.name);
          if (inTransaction) throw annotate(error, text, params);
          result = await run(text, params, options, inTransaction);
        }
        if (!inTransaction) await pg.syncToFs();
        return result;
      });
    },
  };
}

/** As PGlite's own `query` does: the statement and its parameters on the error. */
function annotate(error: unknown, text: string, params: readonly unknown[]): unknown {
  if (error instanceof Error) Object.assign(error, { query: text, params });
  return error;
}
