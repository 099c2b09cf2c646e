import type { SQL } from 'drizzle-orm';
import { sql } from '../db/orm.ts';
import { AppError } from '../errors.ts';

/**
 * Metadata filters, compiled to SQL on documents.metadata (alias `d`). `{key: value}` is
 * equality, which a value inside a metadata array meets too; operators: $eq $ne $in $nin $gt $gte
 * $lt $lte $exists. Keys may be dotted paths. Several keys must all match. Equality uses @> so the
 * GIN index on metadata can serve it (a `$in` list, bound as one array, is checked row by row).
 *
 * Every part of a filter is bounded before any SQL is built (docs/retrieval.md, "Filters and
 * their limits"): a `$in` list once bound one parameter per value, and 32,800 of them overflowed
 * the protocol's 16-bit parameter count, which left the embedded database broken.
 */
export type Filters = Record<string, unknown>;

export const filterLimits = {
  /** Keys (conditions) in one filter object. */
  keys: 50,
  /** Values in one `$in` or `$nin` list. */
  listValues: 1_000,
  /** The whole filter, serialised as JSON. */
  bytes: 65_536,
  /** Nesting of objects and arrays inside a filter value. */
  depth: 8,
  /** Segments of a dotted key. */
  pathSegments: 8,
} as const;

const operators = new Set(['$eq', '$ne', '$in', '$nin', '$gt', '$gte', '$lt', '$lte', '$exists']);

const n = (value: number) => value.toLocaleString('en-US');

/** `where` names the place in the request (`parameters.filters`) so messages point at it. */
function compiler(where: string) {
  const invalid = (message: string) => new AppError({ code: 'invalid_value', message: `${where}.${message}` });
  /** What is wrong with the filter as a whole: `parameters.filters: …`. */
  const invalidWhole = (message: string) => new AppError({ code: 'invalid_value', message: `${where}: ${message}` });

  const depthOf = (value: unknown): number => {
    if (value === null || typeof value !== 'object') return 0;
    let deepest = 0;
    for (const child of Object.values(value)) {
      deepest = Math.max(deepest, depthOf(child));
      if (deepest >= filterLimits.depth) break;
    }
    return deepest + 1;
  };

  /** The document `{a: {b: value}}` for the path a.b: what metadata must contain. */
  const containment = (path: string[], value: unknown): unknown => {
    let doc: unknown = value;
    for (const key of [...path].reverse()) doc = { [key]: doc };
    return doc;
  };

  /**
   * What equality to `value` at `path` accepts: the value itself, or (for anything but an array)
   * an array holding it. jsonb containment looks inside arrays only at the top level:
   * `{"tags": ["a", "b"]} @> {"tags": "a"}` is false, `@> {"tags": ["a"]}` true.
   */
  const documentsFor = (path: string[], value: unknown): unknown[] =>
    Array.isArray(value) ? [containment(path, value)] : [containment(path, value), containment(path, [value])];

  /** Any of the documents, bound as ONE jsonb array parameter however long the list. */
  const containingAnyOf = (docs: unknown[]): SQL =>
    sql`coalesce(d.metadata @> any(array(select jsonb_array_elements(${JSON.stringify(docs)}::jsonb))), false)`;

  /**
   * One `@>` per document, or'ed: each can use the GIN index on metadata (a bitmap OR). Not
   * wrapped in coalesce(), which hides them from the index: a document without metadata makes it
   * null, which a WHERE takes as false, and `$ne` negates it through `negated`.
   */
  const containing = (path: string[], value: unknown): SQL =>
    sql`(${sql.join(
      documentsFor(path, value).map((doc) => sql`d.metadata @> ${JSON.stringify(doc)}::jsonb`),
      sql` or `,
    )})`;

  /** True where `condition` is false or null (no metadata at all). */
  const negated = (condition: SQL): SQL => sql`not coalesce(${condition}, false)`;

  const containingAny = (path: string[], values: unknown[]): SQL =>
    containingAnyOf(values.flatMap((v) => documentsFor(path, v)));

  const compare = (path: string[], op: string, value: unknown, key: string): SQL => {
    const sqlOp = sql.raw({ $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' }[op] as string);
    const at = sql`d.metadata #> ${sql.param(path)}::text[]`;
    const text = sql`d.metadata #>> ${sql.param(path)}::text[]`;
    if (typeof value === 'number' && Number.isFinite(value)) {
      return sql`(jsonb_typeof(${at}) = 'number' and (${text})::numeric ${sqlOp} ${value})`;
    }
    if (typeof value === 'string') return sql`(jsonb_typeof(${at}) = 'string' and ${text} ${sqlOp} ${value})`;
    throw invalid(`${key}.${op}: must be a number or a string`);
  };

  const condition = (key: string, spec: unknown): SQL => {
    // A Mongo-style {"$or": [...]} read as a metadata field named "$or" matched nothing, silently.
    if (key.startsWith('$')) {
      throw invalid(
        `${key}: an operator goes under a metadata key ({"field": {"$in": [...]}}); the keys of filters ` +
          'are all required together, and $and, $or and $not are not supported',
      );
    }
    const path = key.split('.');
    if (path.some((p) => p === '')) throw invalid(`${key}: empty key`);
    if (path.length > filterLimits.pathSegments) {
      throw invalid(`${key}: at most ${filterLimits.pathSegments} path segments`);
    }
    if (depthOf(spec) > filterLimits.depth) throw invalid(`${key}: nested deeper than ${filterLimits.depth} levels`);
    const isOperatorObject =
      spec !== null &&
      typeof spec === 'object' &&
      !Array.isArray(spec) &&
      Object.keys(spec).some((k) => k.startsWith('$'));
    if (!isOperatorObject) return containing(path, spec);
    const parts: SQL[] = [];
    for (const [op, value] of Object.entries(spec as Record<string, unknown>)) {
      if (!operators.has(op)) throw invalid(`${key}: unknown operator ${op}`);
      switch (op) {
        case '$eq':
          parts.push(containing(path, value));
          break;
        case '$ne':
          parts.push(negated(containing(path, value)));
          break;
        case '$in':
        case '$nin': {
          if (!Array.isArray(value) || value.length === 0) throw invalid(`${key}.${op}: must be a non-empty array`);
          if (value.length > filterLimits.listValues) {
            throw invalid(`${key}.${op}: at most ${n(filterLimits.listValues)} values (got ${n(value.length)})`);
          }
          const any = containingAny(path, value);
          parts.push(op === '$in' ? any : negated(any));
          break;
        }
        case '$exists': {
          if (typeof value !== 'boolean') throw invalid(`${key}.$exists: must be true or false`);
          const exists = sql`(d.metadata #> ${sql.param(path)}::text[]) is not null`;
          parts.push(value ? exists : sql`not ${exists}`);
          break;
        }
        default:
          parts.push(compare(path, op, value, key));
      }
    }
    return sql.join(parts, sql` and `);
  };

  return (filters: Filters | undefined): SQL | undefined => {
    if (filters === undefined) return undefined;
    const entries = Object.entries(filters);
    if (entries.length === 0) return undefined;
    if (entries.length > filterLimits.keys)
      throw invalidWhole(`too many keys (at most ${filterLimits.keys}, got ${entries.length})`);
    // Lists are checked first so the message names the list, not the size it makes.
    for (const [key, spec] of entries) {
      if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) continue;
      for (const op of ['$in', '$nin'] as const) {
        const list = (spec as Record<string, unknown>)[op];
        if (Array.isArray(list) && list.length > filterLimits.listValues) {
          throw invalid(`${key}.${op}: at most ${n(filterLimits.listValues)} values (got ${n(list.length)})`);
        }
      }
    }
    const bytes = Buffer.byteLength(JSON.stringify(filters));
    if (bytes > filterLimits.bytes) throw invalidWhole(`${n(bytes)} bytes (at most ${n(filterLimits.bytes)})`);
    return sql.join(
      entries.map(([key, spec]) => sql`(${condition(key, spec)})`),
      sql` and `,
    );
  };
}

/** SQL that is true for documents (alias `d`) matching every filter; undefined without filters. */
export const compileFilters = compiler('parameters.filters');
