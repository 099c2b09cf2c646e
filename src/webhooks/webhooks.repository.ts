import type { SQL } from 'drizzle-orm';
import { and, count, desc, eq, inArray, isNull, sql } from '../db/orm.ts';
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
  | { ok: true; status: number; body: string | null }
  | { ok: false; status: number | null; error: string; body: string | null };

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
    /**
     * Inserts the endpoint unless its key already has `limit` (no limit: undefined); answers the
     * row, or how many the key has. Registrations of one key take turns (a transaction-scoped
     * advisory lock on the key): counted apart from the insert, 150 at once made 111 to 150.
     */
    async createEndpoint(
      row: typeof webhookEndpoints.$inferInsert,
      limit?: number,
    ): Promise<{ created: typeof webhookEndpoints.$inferSelect } | { refused: number }> {
      return db.transaction(async (tx) => {
        if (limit !== undefined) {
          const key = `ragport:webhook-endpoints:${row.keyId ?? ''}`;
          await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${key}))`);
          const [owned] = await tx
            .select({ n: count() })
            .from(webhookEndpoints)
            .where(row.keyId == null ? isNull(webhookEndpoints.keyId) : eq(webhookEndpoints.keyId, row.keyId));
          if ((owned?.n ?? 0) >= limit) return { refused: owned?.n ?? 0 };
        }
        const [created] = await tx.insert(webhookEndpoints).values(row).returning();
        return { created: created as typeof webhookEndpoints.$inferSelect };
      });
    },

    /** A page of the endpoints `scope` lets a caller see, newest first. */
    listEndpoints(scope: EndpointScope, limit: number, offset: number) {
      return db
        .select()
        .from(webhookEndpoints)
        .where(visibleIn(scope))
        .orderBy(desc(webhookEndpoints.createdAt), desc(webhookEndpoints.id))
        .limit(limit)
        .offset(offset);
    },

    async countEndpoints(scope: EndpointScope): Promise<number> {
      const [row] = await db.select({ n: count() }).from(webhookEndpoints).where(visibleIn(scope));
      return row?.n ?? 0;
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
        // The lease goes too: an attempt in flight no longer records its outcome over this, and
        // the delivery is sent again even if that attempt succeeds.
        .set({
          status: 'pending',
          attempts: 0,
          nextAttemptAt: sql`now()`,
          updatedAt: sql`now()`,
          leaseOwner: null,
          leaseExpiresAt: null,
        })
        .where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.endpointId, endpointId)))
        .returning({ id: webhookDeliveries.id });
      return rows.length > 0;
    },

    /**
     * Fails the deliveries whose every attempt was leased but whose last outcome was never
     * recorded (the worker died, or could not write it), rather than sending them beyond
     * `maxAttempts`.
     */
    async failExhausted(maxAttempts: number): Promise<void> {
      await db.execute(sql`update webhook_deliveries
          set status = 'failed', lease_owner = null, lease_expires_at = null, updated_at = now(),
              last_error = coalesce(last_error || '; ', '') || 'the outcome of the last attempt was never recorded'
          where status = 'pending' and attempts >= ${maxAttempts}
            and (lease_expires_at is null or lease_expires_at < now())`);
    },

    /**
     * Leases due deliveries, earliest first: no more of one endpoint than `perEndpoint` with those
     * this worker has in flight (`inFlight`, by endpoint), none of a `paused` endpoint, looked for
     * among the earliest few hundred due, and none out of attempts. A worker that dies mid-send loses its lease, and
     * another sends the delivery again with the same id: at least once.
     */
    claim(
      workerId: string,
      leaseMs: number,
      options: {
        limit: number;
        perEndpoint: number;
        maxAttempts: number;
        inFlight?: ReadonlyMap<string, number>;
        /** Endpoints not to send to now (paused after failing to answer). */
        paused?: readonly string[];
      },
    ): Promise<ClaimedDelivery[]> {
      const busy = [...(options.inFlight ?? new Map<string, number>())];
      const ids = sql.param(busy.map(([id]) => id));
      const counts = sql.param(busy.map(([, n]) => n));
      // Endpoints already at their share, or paused, are left out before the earliest due are
      // taken, so a backlog of one cannot fill the look-ahead while others wait behind it.
      const full = sql.param([
        ...busy.filter(([, n]) => n >= options.perEndpoint).map(([id]) => id),
        ...(options.paused ?? []),
      ]);
      return queryRows<ClaimedDelivery>(
        db,
        sql`update webhook_deliveries d
            set lease_owner = ${workerId}, lease_expires_at = now() + ${leaseMs} * interval '1 millisecond',
                attempts = d.attempts + 1, updated_at = now()
            from webhook_endpoints e
            where e.id = d.endpoint_id and d.id in (
              select id from webhook_deliveries
              where id in (
                select ranked.id from (
                  select id, endpoint_id, next_attempt_at,
                         row_number() over (partition by endpoint_id order by next_attempt_at) as nth
                  from (
                    select id, endpoint_id, next_attempt_at from webhook_deliveries
                    where status = 'pending' and next_attempt_at <= now()
                      and (lease_expires_at is null or lease_expires_at < now())
                      and attempts < ${options.maxAttempts}
                      and not (endpoint_id = any(${full}::text[]))
                    order by next_attempt_at limit 500) due
                ) ranked
                left join unnest(${ids}::text[], ${counts}::int[]) as busy(endpoint_id, n)
                  on busy.endpoint_id = ranked.endpoint_id
                where ranked.nth + coalesce(busy.n, 0) <= ${options.perEndpoint}
                order by ranked.next_attempt_at limit ${options.limit})
              and status = 'pending' and (lease_expires_at is null or lease_expires_at < now())
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
