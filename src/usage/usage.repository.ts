import { and, eq, gte, sql } from '../db/orm.ts';
import type { Db } from '../db/client.ts';
import { usageDaily } from '../db/schema/usage.ts';

export interface UsageDelta {
  keyId: string;
  day: string;
  model: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
}

export function createUsageRepository(db: Db) {
  return {
    /** Adds each delta to its (key, day, model) row, creating it when missing: one statement. */
    async add(deltas: readonly UsageDelta[], trx: Db = db): Promise<void> {
      if (deltas.length === 0) return;
      await trx
        .insert(usageDaily)
        .values([...deltas])
        .onConflictDoUpdate({
          target: [usageDaily.keyId, usageDaily.day, usageDaily.model],
          set: {
            requests: sql`${usageDaily.requests} + excluded.requests`,
            promptTokens: sql`${usageDaily.promptTokens} + excluded.prompt_tokens`,
            completionTokens: sql`${usageDaily.completionTokens} + excluded.completion_tokens`,
          },
        });
    },

    /** Prompt plus completion tokens, and requests, of a key from `firstDay` (inclusive) on. */
    async usageSince(keyId: string, firstDay: string, trx: Db = db): Promise<{ tokens: number; requests: number }> {
      const [row] = await trx
        .select({
          tokens: sql<string | null>`sum(${usageDaily.promptTokens} + ${usageDaily.completionTokens})`,
          requests: sql<string | null>`sum(${usageDaily.requests})`,
        })
        .from(usageDaily)
        .where(and(eq(usageDaily.keyId, keyId), gte(usageDaily.day, firstDay)));
      return { tokens: Number(row?.tokens ?? 0), requests: Number(row?.requests ?? 0) };
    },
  };
}

export type UsageRepository = ReturnType<typeof createUsageRepository>;
