import { sql, type SQL } from 'drizzle-orm';
import { AppError } from '../http/errors.ts';

/**
 * Metadata filters, compiled to SQL on documents.metadata (alias `d`). `{key: value}` is
 * equality; operators: $eq $ne $in $nin $gt $gte $lt $lte $exists. Keys may be dotted paths.
 * Several keys must all match. Equality uses @> so the GIN index on metadata serves it.
 */
export type Filters = Record<string, unknown>;

const operators = new Set(['$eq', '$ne', '$in', '$nin', '$gt', '$gte', '$lt', '$lte', '$exists']);

const invalid = (message: string) => new AppError({ code: 'invalid_value', message: `parameters.filters.${message}` });

function containing(path: string[], value: unknown): SQL {
  let doc: unknown = value;
  for (const key of [...path].reverse()) doc = { [key]: doc };
  return sql`coalesce(d.metadata @> ${JSON.stringify(doc)}::jsonb, false)`;
}

function compare(path: string[], op: string, value: unknown, key: string): SQL {
  const sqlOp = sql.raw({ $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' }[op] as string);
  const at = sql`d.metadata #> ${sql.param(path)}::text[]`;
  const text = sql`d.metadata #>> ${sql.param(path)}::text[]`;
  if (typeof value === 'number' && Number.isFinite(value)) {
    return sql`(jsonb_typeof(${at}) = 'number' and (${text})::numeric ${sqlOp} ${value})`;
  }
  if (typeof value === 'string') return sql`(jsonb_typeof(${at}) = 'string' and ${text} ${sqlOp} ${value})`;
  throw invalid(`${key}.${op}: must be a number or a string`);
}

function condition(key: string, spec: unknown): SQL {
  const path = key.split('.');
  if (path.some((p) => p === '')) throw invalid(`${key}: empty key`);
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
        parts.push(sql`not ${containing(path, value)}`);
        break;
      case '$in':
      case '$nin': {
        if (!Array.isArray(value) || value.length === 0) throw invalid(`${key}.${op}: must be a non-empty array`);
        const any = sql.join(
          value.map((v) => containing(path, v)),
          sql` or `,
        );
        parts.push(op === '$in' ? sql`(${any})` : sql`not (${any})`);
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
}

/** SQL that is true for documents (alias `d`) matching every filter; `true` without filters. */
export function compileFilters(filters: Filters | undefined): SQL | undefined {
  if (filters === undefined) return undefined;
  const entries = Object.entries(filters);
  if (entries.length === 0) return undefined;
  if (entries.length > 50) throw invalid('too many filters (at most 50)');
  return sql.join(
    entries.map(([key, spec]) => sql`(${condition(key, spec)})`),
    sql` and `,
  );
}
