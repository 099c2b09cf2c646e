import { and, desc, eq, gte, isNull, sql } from '../db/orm.ts';
import type { Db } from '../db/client.ts';
import { apiKeys, type ApiKeyRow, type KeyQuota, type KeyRateLimits } from '../db/schema/keys.ts';
import { usageDaily } from '../db/schema/usage.ts';

export interface NewKeyRow {
  id: string;
  name: string;
  secretHash: string;
  prefix: string;
  scopes: string[];
  tier: string;
  rateLimits: KeyRateLimits | null;
  collections: string[] | null;
  quota: KeyQuota | null;
  expiresAt: Date | null;
}

export type KeyPatch = Partial<
  Pick<NewKeyRow, 'name' | 'scopes' | 'tier' | 'rateLimits' | 'collections' | 'quota' | 'expiresAt'>
>;

export interface UsageRow {
  day: string;
  model: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
}

/**
 * The keys a manager may see: all of them (null), or only those restricted to some of these
 * collections (a key without a restriction, or restricted to none, is never among them).
 */
export type KeyScope = readonly string[] | null;

/** Every change to a key is announced here (payload: the key id), in the transaction that makes it. */
export const KEY_CHANGES_CHANNEL = 'ragport_api_keys';

function withinScope(scope: KeyScope) {
  if (scope === null) return undefined;
  const names = sql.join(
    scope.map((name) => sql`${name}`),
    sql`, `,
  );
  return sql`(${apiKeys.collections} is not null and cardinality(${apiKeys.collections}) > 0 and ${apiKeys.collections} <@ array[${names}]::text[])`;
}

export function createKeysRepository(db: Db) {
  // The scope is part of each statement, so a key changed meanwhile by another manager cannot be
  // written (or its secret replaced) on the strength of an earlier read.
  const live = (id: string, scope: KeyScope) => and(eq(apiKeys.id, id), isNull(apiKeys.revokedAt), withinScope(scope));
  /**
   * Runs a write of one key and announces it on commit, so that other instances drop what they
   * remember of the key before anyone can learn of the change from this one.
   */
  const announced = <T>(id: string, write: (tx: Db) => Promise<T>): Promise<T> =>
    db.transaction(async (tx) => {
      const result = await write(tx);
      await tx.execute(sql`select pg_notify(${KEY_CHANGES_CHANNEL}, ${id})`);
      return result;
    });
  // Every authenticated request runs this one: built once, and prepared once per connection.
  const byHash = db
    .select()
    .from(apiKeys)
    .where(eq(apiKeys.secretHash, sql.placeholder('secretHash')))
    .limit(1)
    .prepare('api_key_by_hash');

  return {
    async insert(row: NewKeyRow): Promise<ApiKeyRow> {
      const [created] = await db.insert(apiKeys).values(row).returning();
      if (!created) throw new Error('insert returned no row');
      return created;
    },

    /** The key with this secret hash, revoked or not: the caller tells the two apart. */
    async findByHash(secretHash: string): Promise<ApiKeyRow | undefined> {
      const [row] = await byHash.execute({ secretHash });
      return row;
    },

    async findLive(id: string, scope: KeyScope): Promise<ApiKeyRow | undefined> {
      const [row] = await db.select().from(apiKeys).where(live(id, scope)).limit(1);
      return row;
    },

    async listLive(scope: KeyScope): Promise<ApiKeyRow[]> {
      return db
        .select()
        .from(apiKeys)
        .where(and(isNull(apiKeys.revokedAt), withinScope(scope)))
        .orderBy(desc(apiKeys.createdAt), apiKeys.id);
    },

    async update(id: string, patch: KeyPatch, scope: KeyScope): Promise<ApiKeyRow | undefined> {
      const [row] = await announced(id, (tx) =>
        tx
          .update(apiKeys)
          .set({ ...patch, updatedAt: sql`now()` })
          .where(live(id, scope))
          .returning(),
      );
      return row;
    },

    async replaceSecret(
      id: string,
      secretHash: string,
      prefix: string,
      scope: KeyScope,
    ): Promise<ApiKeyRow | undefined> {
      const [row] = await announced(id, (tx) =>
        tx
          .update(apiKeys)
          .set({ secretHash, prefix, updatedAt: sql`now()` })
          .where(live(id, scope))
          .returning(),
      );
      return row;
    },

    /** Revocation keeps the row (usage history stays attributable) and stops the key at once. */
    async revoke(id: string, scope: KeyScope): Promise<boolean> {
      const rows = await announced(id, (tx) =>
        tx
          .update(apiKeys)
          .set({ revokedAt: sql`now()`, updatedAt: sql`now()` })
          .where(live(id, scope))
          .returning({ id: apiKeys.id }),
      );
      return rows.length > 0;
    },

    async usageSince(keyId: string, firstDay: string): Promise<UsageRow[]> {
      return db
        .select({
          day: usageDaily.day,
          model: usageDaily.model,
          requests: usageDaily.requests,
          promptTokens: usageDaily.promptTokens,
          completionTokens: usageDaily.completionTokens,
        })
        .from(usageDaily)
        .where(and(eq(usageDaily.keyId, keyId), gte(usageDaily.day, firstDay)))
        .orderBy(usageDaily.day, usageDaily.model);
    },
  };
}

export type KeysRepository = ReturnType<typeof createKeysRepository>;
