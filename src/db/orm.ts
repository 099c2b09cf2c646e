import { createRequire } from 'node:module';
import type * as DrizzleOrm from 'drizzle-orm';
import type * as DrizzlePgCore from 'drizzle-orm/pg-core';

/**
 * drizzle-orm's runtime values, loaded from its CommonJS build and typed as its ES modules; with
 * ./orm-drivers.ts the only module that imports drizzle-orm for more than types (eslint says so).
 *
 * Node 24's ES module loader re-reads drizzle's 178 kB package.json for each of its hundreds of
 * files, and V8 keeps the heap that garbage grew: importing the app left 250 MB RSS that way and
 * 163 MB this way, and the server 20 s after start holds about 125 MB less (832 → 705 MB).
 */
const requireCjs = createRequire(import.meta.url);

const orm = requireCjs('drizzle-orm') as typeof DrizzleOrm;
export const { and, asc, count, desc, eq, getTableColumns, gte, inArray, isNull, lt, or, sql } = orm;

const pgCore = requireCjs('drizzle-orm/pg-core') as typeof DrizzlePgCore;
export const {
  bigint,
  boolean,
  customType,
  date,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} = pgCore;
