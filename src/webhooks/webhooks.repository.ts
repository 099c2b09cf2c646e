import type { SQL } from 'drizzle-orm';
import { and, desc, eq, inArray, isNull, sql } from '../db/orm.ts';
import { queryRows, type Db } from '../db/client.ts';
import { webhookDeliveries, webhookEndpoints } from '../db/schema/webhooks.ts';

export interface ClaimedDelivery {
  id: string;
  endpoint_id: string;
  payload: Record<string, unknown>;
  attempts: number;
  url: string;
  secret_sealed: string;
}

export type AttemptOutcome =
  { ok: true; status: number; body: string } | { ok: false; status: number | null; error: string; body: string | null };

/** Which endpoints a caller may see (webhooks.service.ts decides). */
export interface EndpointScope {
  /** Only this key's endpoints (null: the configured admin key's); undefined: every key's. */
  ownerKeyId: string | null | undefined;
  /** Only endpoints of one of these collections; null: endpoints of any collection, or of none. */
  collections: readonly string[] | null;
}

function visibleIn({ ownerKeyId, collections }: EndpointScope): SQL | undefined {
  const owner =
    ownerKeyId === undefined
      ? undefined
      : ownerKeyId === null
        ? isNull(webhookEndpoints.keyId)
        : eq(webhookEndpoints.keyId, ownerKeyId);
  // An empty list matches nothing (inArray renders it as false).
  const collection = collections === null ? undefined : inArray(webhookEndpoints.collectionName, [...collections]);
  return and(owner, collection);
}

export function createWebhooksRepository(db: Db) {
  return {
    async createEndpoint(row: typeof webhookEndpoints.$inferInsert) {
      const [created] = await db.insert(webhookEndpoints).values(row).returning();
      return created as typeof webhookEndpoints.$inferSelect;
    },

    /** The endpoints `scope` lets a caller see, newest first. */
    listEndpoints(scope: EndpointScope) {
      return db
        .select()
        .from(webhookEndpoints)
        .where(visibleIn(scope))
        .orderBy(desc(webhookEndpoints.createdAt))
        .limit(1000);
    },

    async getEndpoint(id: string, scope: EndpointScope) {
      const [row] = await db
        .select()
        .from(webhookEndpoints)
        .where(and(eq(webhookEndpoints.id, id), visibleIn(scope)));
      return row;
    },

    async deleteEndpoint(id: string): Promise<boolean> {
      const rows = await db
        .delete(webhookEndpoints)
        .where(eq(webhookEndpoints.id, id))
        .returning({ id: webhookEndpoints.id });
      return rows.length > 0;
    },

    listDeliveries(endpointId: string, limit: number, offset: number) {
      return db
        .select()
        .from(webhookDeliveries)
        .where(eq(webhookDeliveries.endpointId, endpointId))
        .orderBy(desc(webhookDeliveries.createdAt), desc(webhookDeliveries.id))
        .limit(limit)
        .offset(offset);
    },

    /** Sends the delivery again soon, with the same id: back to pending with its attempts reset. */
    async redeliver(endpointId: string, deliveryId: string): Promise<boolean> {
      const rows = await db
        .update(webhookDeliveries)
        .set({ status: 'pending', attempts: 0, nextAttemptAt: sql`now()`, updatedAt: sql`now()` })
        .where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.endpointId, endpointId)))
        .returning({ id: webhookDeliveries.id });
      return rows.length > 0;
    },

    /**
     * Leases due deliveries. A worker that dies mid-send loses its lease, and another sends the
     * delivery again with the same id: at least once.
     */
    claim(workerId: string, leaseMs: number, limit: number): Promise<ClaimedDelivery[]> {
      return queryRows<ClaimedDelivery>(
        db,
        sql`update webhook_deliveries d
            set lease_owner = ${workerId}, lease_expires_at = now() + ${leaseMs} * interval '1 millisecond',
                attempts = d.attempts + 1, updated_at = now()
            from webhook_endpoints e
            where e.id = d.endpoint_id and d.id in (
              select id from webhook_deliveries
              where status = 'pending' and next_attempt_at <= now()
                and (lease_expires_at is null or lease_expires_at < now())
              order by next_attempt_at limit ${limit}
              for update skip locked)
            returning d.id, d.endpoint_id, d.payload, d.attempts, e.url, e.secret_sealed`,
      );
    },

    /** Records an attempt; only the lease holder may. A failure is retried until `maxAttempts`. */
    async finish(
      id: string,
      workerId: string,
      outcome: AttemptOutcome,
      retry: { maxAttempts: number; delayMs: number },
    ): Promise<void> {
      const common = sql`lease_owner = null, lease_expires_at = null, updated_at = now(),
        last_status = ${outcome.status}, response_body = ${outcome.body}`;
      if (outcome.ok) {
        await db.execute(sql`update webhook_deliveries set status = 'delivered', delivered_at = now(), last_error = null, ${common}
          where id = ${id} and lease_owner = ${workerId}`);
        return;
      }
      await db.execute(sql`update webhook_deliveries set ${common}, last_error = ${outcome.error},
          status = case when attempts >= ${retry.maxAttempts} then 'failed' else 'pending' end,
          next_attempt_at = now() + ${retry.delayMs} * interval '1 millisecond'
        where id = ${id} and lease_owner = ${workerId}`);
    },
  };
}

export type WebhooksRepository = ReturnType<typeof createWebhooksRepository>;
