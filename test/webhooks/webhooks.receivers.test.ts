import { createServer, type Server, type ServerResponse } from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { queryRows } from '../../src/db/client.ts';
import { sql } from '../../src/db/orm.ts';
import { createWebhooksRepository } from '../../src/webhooks/webhooks.repository.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { until } from '../support/poll.ts';

/**
 * Receivers that misbehave, and many endpoints: a receiver's answer, or one endpoint that never
 * answers, must not stop deliveries, loop them, or hold up other endpoints.
 */
const TIMEOUT_MS = 2_000;
const MAX_ATTEMPTS = 3;

interface Hit {
  path: string;
  id: string;
  at: number;
}
let hits: Hit[] = [];
/** Requests a receiver holds open right now, and the most it held at once, by path. */
const open = new Map<string, number>();
const mostOpen = new Map<string, number>();
let receiver: Server;
let base: string;

/** What each path answers. */
const behaviours: Record<string, (res: ServerResponse) => void> = {
  '/ok': (res) => res.writeHead(200).end('ok'),
  // A gzip-compressed answer holds NUL bytes, which PostgreSQL text cannot.
  '/gzip': (res) => res.writeHead(200, { 'content-encoding': 'gzip' }).end(gzipSync('{"received": true}')),
  '/nul500': (res) => res.writeHead(500).end('bad\u0000answer'),
  // 200 at once, then a body that never ends.
  '/trickle': (res) => {
    res.writeHead(200);
    res.write('a');
  },
  '/hang': () => undefined,
  '/slow': (res) => setTimeout(() => res.writeHead(200).end('late'), 800),
};

let t: TestApp;
beforeAll(async () => {
  receiver = createServer((req, res) => {
    const path = req.url ?? '';
    req.resume();
    req.on('end', () => {
      hits.push({ path, id: String(req.headers['webhook-id']), at: Date.now() });
      open.set(path, (open.get(path) ?? 0) + 1);
      mostOpen.set(path, Math.max(mostOpen.get(path) ?? 0, open.get(path) ?? 0));
      res.on('close', () => open.set(path, (open.get(path) ?? 1) - 1));
      (behaviours[path.startsWith('/hang/') ? '/hang' : path] ?? behaviours['/ok'])?.(res);
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
  t = await startTestApp({
    config: {
      webhooks: {
        ...loadConfig({}).webhooks,
        signingKey: 'test-signing-key-0123456789abcdefghij',
        allowPrivateTargets: true,
        timeoutMs: TIMEOUT_MS,
        maxAttempts: MAX_ATTEMPTS,
        retryBaseMs: 100,
      },
    },
  });
}, 120_000);
afterAll(async () => {
  await t.close();
  receiver.closeAllConnections();
  await new Promise((r) => receiver.close(r));
});
beforeEach(() => {
  hits = [];
});

async function register(path: string, key = t.adminKey) {
  const r = await t.request('/api/v1/webhooks', {
    method: 'POST',
    key,
    json: { url: `${base}${path}`, events: ['document.processed'] },
  });
  expect(r.status).toBe(201);
  return ((await r.json()) as { id: string }).id;
}

let serial = 0;
/** Due deliveries queued for an endpoint, as the trigger writes them. */
async function queue(endpointId: string, count = 1): Promise<string[]> {
  const ids = Array.from({ length: count }, () => `evt_r${++serial}`);
  for (const id of ids) {
    await t.database.db.execute(sql`insert into webhook_deliveries (id, endpoint_id, event, payload)
      values (${id}, ${endpointId}, 'document.processed', '{"type": "document.processed", "data": {}}')`);
  }
  return ids;
}

interface Delivery {
  id: string;
  status: string;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  response_body: string | null;
}
async function deliveryOf(endpointId: string, id: string): Promise<Delivery | undefined> {
  const r = await t.request(`/api/v1/webhooks/${endpointId}/deliveries?page_size=100`);
  return ((await r.json()) as { deliveries: Delivery[] }).deliveries.find((d) => d.id === id);
}
const settled = (endpointId: string, id: string) =>
  until(`delivery ${id} settled`, async () => {
    const d = await deliveryOf(endpointId, id);
    return d !== undefined && d.status !== 'pending' ? d : undefined;
  });

describe("a receiver's answer", () => {
  it('with NUL bytes (a gzip answer) is recorded: delivered once, not sent again and again', async () => {
    const hook = await register('/gzip');
    const [id] = await queue(hook);
    const delivery = await settled(hook, id as string);
    expect(delivery).toMatchObject({ status: 'delivered', attempts: 1, last_status: 200 });
    expect(delivery.response_body).not.toContain('\u0000');
    expect(hits.filter((h) => h.id === id)).toHaveLength(1);

    // A failure with such a body is retried and ends failed after the last attempt, as any other.
    const failing = await register('/nul500');
    const [other] = await queue(failing);
    const failed = await settled(failing, other as string);
    expect(failed).toMatchObject({ status: 'failed', attempts: MAX_ATTEMPTS, last_error: 'receiver answered 500' });
    expect(failed.response_body).toBe('bad\ufffdanswer');
    expect(hits.filter((h) => h.id === other)).toHaveLength(MAX_ATTEMPTS);
  });

  it('200 with a body that never ends is a success: the status decides', async () => {
    const hook = await register('/trickle');
    const [id] = await queue(hook);
    const delivery = await settled(hook, id as string);
    expect(delivery).toMatchObject({ status: 'delivered', attempts: 1, last_status: 200 });
    expect(hits.filter((h) => h.id === id)).toHaveLength(1);
  });
});

describe('many deliveries, one receiver that never answers', () => {
  it('another endpoint is served meanwhile, and the hanging one holds a few slots, not all', async () => {
    const hanging = await register('/hang');
    const healthy = await register('/ok');
    await queue(hanging, 20);
    const [wanted] = await queue(healthy);
    const got = await until('the healthy delivery', () => hits.find((h) => h.id === wanted));
    const firstHang = hits.find((h) => h.path === '/hang');
    // Received while the hanging endpoint's first attempts were still open, not after they timed out.
    expect(firstHang).toBeDefined();
    expect(got.at - (firstHang as Hit).at).toBeLessThan(TIMEOUT_MS);
    expect(open.get('/hang')).toBeGreaterThan(0);
    // At most 4 attempts at once to one endpoint, through its first timeouts and the next claims.
    await until('the first timeouts', () => (hits.filter((h) => h.path === '/hang').length > 4 ? true : undefined));
    expect(mostOpen.get('/hang')).toBe(4);
    await t.request(`/api/v1/webhooks/${hanging}`, { method: 'DELETE' });
  });
});

describe("one tenant's many endpoints that never answer", () => {
  it("do not hold another's delivery behind their backlog: an endpoint that did not answer is paused", async () => {
    // 20 endpoints × 30 deliveries, every one hanging: 80 may be in flight at once, more than the
    // 64 slots. Each wave of attempts took every slot for a timeout, and the healthy endpoint's
    // delivery, due after all of them, waited 14 s here (~7 timeouts; 24 s at 800 deliveries in
    // a probe); now about one.
    const hanging: string[] = [];
    for (let i = 0; i < 20; i++) hanging.push(await register(`/hang/${i}`));
    const healthy = await register('/ok');
    for (const id of hanging) await queue(id, 30);
    const [wanted] = await queue(healthy);
    const queuedAt = Date.now();
    const got = await until('the healthy delivery', () => hits.find((h) => h.id === wanted), { timeoutMs: 60_000 });
    // Sent once the first wave timed out, not after the backlog's attempts.
    expect(got.at - queuedAt).toBeLessThan(3 * TIMEOUT_MS);
    for (const id of hanging) await t.request(`/api/v1/webhooks/${id}`, { method: 'DELETE' });
  });
});

describe('deliveries that cannot be sent or recorded', () => {
  it('an endpoint whose secret this WEBHOOK_SIGNING_KEY cannot open: failed attempts with the reason, then failed', async () => {
    const hook = await register('/ok');
    // What a changed WEBHOOK_SIGNING_KEY leaves: a secret sealed under another key.
    const [row] = await queryRows<{ secret_sealed: string }>(
      t.database.db,
      sql`select secret_sealed from webhook_endpoints where id = ${hook}`,
    );
    const sealed = row?.secret_sealed as string;
    const tampered = `${sealed.slice(0, -4)}${sealed.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
    await t.database.db.execute(sql`update webhook_endpoints set secret_sealed = ${tampered} where id = ${hook}`);
    const [id] = await queue(hook);
    const failed = await settled(hook, id as string);
    expect(failed.status).toBe('failed');
    expect(failed.attempts).toBe(MAX_ATTEMPTS);
    expect(failed.last_error).toMatch(/signing secret cannot be opened: WEBHOOK_SIGNING_KEY/);
    expect(hits.filter((h) => h.id === id)).toEqual([]);
  });

  it('a delivery out of attempts whose last outcome was never recorded is failed, not sent again', async () => {
    const hook = await register('/ok');
    await t.database.db.execute(sql`insert into webhook_deliveries
      (id, endpoint_id, event, payload, attempts, lease_owner, lease_expires_at)
      values ('evt_exhausted', ${hook}, 'document.processed', '{}', ${MAX_ATTEMPTS}, 'whs_dead', now() - interval '1 second')`);
    const repo = createWebhooksRepository(t.database.db);
    expect(
      await repo.claim('whs_test', 60_000, { limit: 10, perEndpoint: 4, maxAttempts: MAX_ATTEMPTS }),
    ).not.toContainEqual(expect.objectContaining({ id: 'evt_exhausted' }));
    await repo.failExhausted(MAX_ATTEMPTS);
    expect(await deliveryOf(hook, 'evt_exhausted')).toMatchObject({
      status: 'failed',
      attempts: MAX_ATTEMPTS,
      last_error: 'the outcome of the last attempt was never recorded',
    });
    expect(hits.filter((h) => h.id === 'evt_exhausted')).toEqual([]);
  });

  it('redeliver while an attempt is in flight sends it once more', async () => {
    const hook = await register('/slow');
    const [id] = await queue(hook);
    await until('the first attempt', () => hits.find((h) => h.id === id));
    const again = await t.request(`/api/v1/webhooks/${hook}/deliveries/${id as string}/redeliver`, { method: 'POST' });
    expect(again.status).toBe(202);
    await until('the second attempt', () => (hits.filter((h) => h.id === id).length >= 2 ? true : undefined));
    const delivery = await settled(hook, id as string);
    expect(delivery.status).toBe('delivered');
  });
});

describe('registering endpoints', () => {
  it('a URL with credentials is refused: they would be listed in clear and never sent', async () => {
    const r = await t.request('/api/v1/webhooks', {
      method: 'POST',
      json: { url: `${base.replace('//', '//user:secret@')}/ok`, events: ['document.processed'] },
    });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: string }).error).toMatch(/^url: must not carry credentials/);
  });

  it('a key other than an admin key has at most 100 endpoints; lists are paged with their total', async () => {
    const { key } = await t.createKey({ name: 'many-hooks', scopes: ['webhooks'], tier: 'enterprise' });
    for (let i = 0; i < 100; i++) await register(`/ok?n=${i}`, key);
    const refused = await t.request('/api/v1/webhooks', {
      method: 'POST',
      key,
      json: { url: `${base}/ok`, events: ['document.processed'] },
    });
    expect(refused.status).toBe(409);
    expect(((await refused.json()) as { error: string }).error).toMatch(/the most one key may register \(100\)/);

    const page = async (query: string) =>
      (await (await t.request(`/api/v1/webhooks?${query}`, { key })).json()) as {
        webhooks: { id: string }[];
        total: number;
        page: number;
        page_size: number;
      };
    const all = await page('');
    expect(all).toMatchObject({ total: 100, page: 1, page_size: 1000 });
    expect(all.webhooks).toHaveLength(100);
    const second = await page('page=2&page_size=30');
    expect(second.webhooks.map((w) => w.id)).toEqual(all.webhooks.slice(30, 60).map((w) => w.id));
    expect((await t.request('/api/v1/webhooks?page_size=1001', { key })).status).toBe(400);
  });

  it('registrations sent at once do not get past the limit', async () => {
    // Counted apart from the insert, 150 at once made 111 to 150 endpoints.
    const { key } = await t.createKey({ name: 'racing-hooks', scopes: ['webhooks'], tier: 'enterprise' });
    const statuses = await Promise.all(
      Array.from({ length: 130 }, (_v, i) =>
        t
          .request('/api/v1/webhooks', {
            method: 'POST',
            key,
            json: { url: `${base}/ok?r=${i}`, events: ['document.processed'] },
          })
          .then((r) => r.status),
      ),
    );
    expect(statuses.filter((s) => s === 201)).toHaveLength(100);
    expect(statuses.filter((s) => s === 409)).toHaveLength(30);
    const listed = (await (await t.request('/api/v1/webhooks', { key })).json()) as { total: number };
    expect(listed.total).toBe(100);
  });
});
