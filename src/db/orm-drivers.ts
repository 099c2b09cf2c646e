import { createRequire } from 'node:module';
import type * as NodePg from 'drizzle-orm/node-postgres';
import type * as NodePgMigrator from 'drizzle-orm/node-postgres/migrator';
import type * as Pglite from 'drizzle-orm/pglite';
import type * as PgliteMigrator from 'drizzle-orm/pglite/migrator';

/**
 * drizzle-orm's database drivers and migrators, loaded from its CommonJS build for the reason given
 * in ./orm.ts; apart from that module, so that only the database client loads them (and pg and
 * PGlite with them).
 */
const requireCjs = createRequire(import.meta.url);

export const { drizzle: drizzleNodePg } = requireCjs('drizzle-orm/node-postgres') as typeof NodePg;
export const { migrate: migrateNodePg } = requireCjs('drizzle-orm/node-postgres/migrator') as typeof NodePgMigrator;
export const { drizzle: drizzlePglite } = requireCjs('drizzle-orm/pglite') as typeof Pglite;
export const { migrate: migratePglite } = requireCjs('drizzle-orm/pglite/migrator') as typeof PgliteMigrator;
