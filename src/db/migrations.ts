import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The migrations this release knows (migrations/meta/_journal.json), and what a migration run
 * did. drizzle records each applied migration by its journal time (`created_at`) and applies those
 * newer than the last one recorded; it does not look at rows it does not know. So an older release
 * started on a database a newer one upgraded ran as if nothing had changed, and what it wrote
 * under the old rules could be lost at the next upgrade (a collection deleted by the newer release
 * shows again in the older one, takes uploads, and the newer one's purge removes them).
 */
export interface KnownMigration {
  tag: string;
  when: number;
}

export class DatabaseFromNewerReleaseError extends Error {}

export function knownMigrations(migrationsFolder: string): KnownMigration[] {
  const journal = JSON.parse(readFileSync(path.join(migrationsFolder, 'meta', '_journal.json'), 'utf8')) as {
    entries: { tag: string; when: number }[];
  };
  return journal.entries.map(({ tag, when }) => ({ tag, when }));
}

/** Reads the journal times drizzle recorded; none when the database was never migrated. */
export type RecordedMigrations = () => Promise<number[]>;

/** What both drivers' clients offer: a statement in, its rows out. */
type Query = (text: string) => Promise<{ rows: unknown[] }>;

/** drizzle's record read through `query` (a new database has no table yet). */
export function recordedMigrations(query: Query): RecordedMigrations {
  return async () => {
    const [table] = (await query(`select to_regclass('drizzle.__drizzle_migrations') is not null as present`))
      .rows as { present: boolean }[];
    if (table?.present !== true) return [];
    const rows = (await query(`select created_at::text as created_at from drizzle.__drizzle_migrations`)).rows;
    return (rows as { created_at: string }[]).map((r) => Number(r.created_at));
  };
}

/**
 * Runs `migrate` unless the database holds migrations newer than every one this release knows,
 * and returns the tags it applied (oldest first). Refused before anything is written.
 */
export async function migrateKnown(
  known: KnownMigration[],
  recorded: RecordedMigrations,
  migrate: () => Promise<void>,
): Promise<string[]> {
  const before = new Set(await recorded());
  const latest = known.at(-1);
  const newer = [...before].filter((when) => latest === undefined || when > latest.when);
  if (newer.length > 0) {
    throw new DatabaseFromNewerReleaseError(
      `the database was upgraded by a newer ragport release: it holds ${newer.length} migration(s) ` +
        `this release does not know (the newest recorded ${new Date(Math.max(...newer)).toISOString()}; ` +
        `this release's last is ${latest?.tag ?? 'none'}). An older release on upgraded data is not ` +
        'supported: start the release that upgraded it, or restore a backup taken before the upgrade.',
    );
  }
  await migrate();
  const after = new Set(await recorded());
  return known.filter((m) => after.has(m.when) && !before.has(m.when)).map((m) => m.tag);
}

/** One line for the start-up log: what the migration run did to the schema. */
export function migrationsLine(applied: string[], known: KnownMigration[]): string {
  const last = known.at(-1)?.tag ?? 'none';
  if (applied.length === 0) return `database schema: up to date (${last})`;
  if (applied.length === known.length) return `database schema: created (${known.length} migrations, the last ${last})`;
  return `database schema: upgraded, ${applied.length} migration(s) applied: ${applied.join(', ')}`;
}
