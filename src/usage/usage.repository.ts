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

    /** Prompt plus completion tokens of a key from `firstDay` (inclusive) on. */
    async tokensSince(keyId: string, firstDay: string, trx: Db = db): Promise<number> {
      const [row] = await trx
        .select({ tokens: sql<string | null>`sum(${usageDaily.promptTokens} + ${usageDaily.completionTokens})` })
        .from(usageDaily)
        .where(and(eq(usageDaily.keyId, keyId), gte(usageDaily.day, firstDay)));
      return Number(row?.tokens ?? 0);
    },
  };
}

export type UsageRepository = ReturnType<typeof createUsageRepository>;
