import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { loadConfig, type WebhookConfig } from '../../src/config.ts';
import { isPublicAddress } from '../../src/webhooks/target.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import { until } from '../support/poll.ts';

/** A webhook receiver on loopback: records what it gets, answers as told. */
interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}
let received: Received[] = [];
let answers: { status: number; delayMs?: number }[] = [];
let receiver: Server;
let receiverUrl: string;

const webhookConfig = (overrides: Partial<WebhookConfig> = {}): WebhookConfig => ({
  ...loadConfig({}).webhooks,
  signingKey: 'test-signing-key-0123456789abcdefghij',
  allowPrivateTargets: true,
  timeoutMs: 400,
  maxAttempts: 3,
  retryBaseMs: 50,
  ...overrides,
});

/**
 * The verification recipes of docs/ingestion.md, as the page prints them: the Node one imported
 * from the page's `js` block, the Python one run by python3 on what a receiver got. A recipe that
 * stops matching what ragport signs fails here.
 */
const ingestionPage = readFileSync(new URL('../../docs/ingestion.md', import.meta.url), 'utf8');
const recipe = (lang: string) => {
  const code = new RegExp('```' + lang + '\\n([\\s\\S]*?verify[\\s\\S]*?)```').exec(ingestionPage)?.[1];
  if (code === undefined) throw new Error(`docs/ingestion.md has no ${lang} verification recipe`);
  return code;
};
type Verify = (secret: string, headers: IncomingHttpHeaders, body: string) => boolean;
let verify: Verify;
const recipeDir = mkdtempSync(path.join(tmpdir(), 'ragport-webhook-recipe-'));

/** The page's Python recipe on one delivery, in a python3 process. */
async function verifyInPython(secret: string, headers: IncomingHttpHeaders, body: string): Promise<boolean> {
  const script = `${recipe('python')}
import json, sys
given = json.load(sys.stdin)
print(json.dumps(verify(given["secret"], given["headers"], given["body"].encode())))`;
  const child = execFile('python3', ['-c', script]);
  child.stdin?.end(JSON.stringify({ secret, headers, body }));
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  const [code] = (await once(child, 'close')) as [number];
  if (code !== 0) throw new Error(`python3 recipe exited ${code}`);
  return JSON.parse(out) as boolean;
}

let t: TestApp;
beforeAll(async () => {
  const file = path.join(recipeDir, 'verify.mjs');
  writeFileSync(file, recipe('js'));
  ({ verify } = (await import(pathToFileURL(file).href)) as { verify: Verify });
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      const answer = answers.shift() ?? { status: 200 };
      setTimeout(() => res.writeHead(answer.status).end('x'.repeat(1_000)), answer.delayMs ?? 0);
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const address = receiver.address() as { port: number };
  receiverUrl = `http://127.0.0.1:${address.port}/hook`;
  t = await startTestApp({ config: { webhooks: webhookConfig() } });
  await createCollection(t, 'seen');
  await createCollection(t, 'hidden');
}, 120_000);
afterAll(async () => {
  await t.close();
  receiver.closeAllConnections();
  await new Promise((r) => receiver.close(r));
  rmSync(recipeDir, { recursive: true, force: true });
});
beforeEach(() => {
  received = [];
  answers = [];
});

async function register(key: string, body: Record<string, unknown>) {
  const r = await t.request('/api/v1/webhooks', { method: 'POST', key, json: { url: receiverUrl, ...body } });
  expect(r.status).toBe(201);
  return (await r.json()) as { id: string; secret: string };
}

async function upload(collection: string, name: string) {
  const r = await t.request(`/api/v1/rag/collections/${collection}/documents`, {
    method: 'POST',
    json: { name, content: `Webhook test document ${name}.` },
  });
  const { id } = (await r.json()) as { id: string };
  await waitForDocument(t, id);
  return id;
}

const events = (type: string) =>
  received
    .filter((r) => (JSON.parse(r.body) as { type: string }).type === type)
    .map((r) => ({
      ...r,
      payload: JSON.parse(r.body) as { type: string; data: Record<string, unknown> },
    }));

describe('webhooks', () => {
  it('delivers document.processed signed as documented, and logs the delivery', async () => {
    const { key } = await t.createKey({ name: 'hooks', scopes: ['webhooks', 'read', 'write'] });
    const hook = await register(key, { events: ['document.processed'], collection: 'seen' });
    expect(hook.secret).toMatch(/^whsec_/);
    const listed = await t.request(`/api/v1/webhooks/${hook.id}`, { key });
    expect(JSON.stringify(await listed.json())).not.toContain(hook.secret);

    const docId = await upload('seen', 'a.txt');
    const [got] = await until('the event', () =>
      events('document.processed').length ? events('document.processed') : undefined,
    );
    expect(got?.payload.data).toMatchObject({ document_id: docId, collection: 'seen', status: 'processed' });
    expect(verify(hook.secret, got?.headers ?? {}, got?.body ?? '')).toBe(true);
    expect(verify(hook.secret, got?.headers ?? {}, `${got?.body ?? ''} `)).toBe(false);
    expect(await verifyInPython(hook.secret, got?.headers ?? {}, got?.body ?? '')).toBe(true);
    expect(await verifyInPython(hook.secret, got?.headers ?? {}, `${got?.body ?? ''} `)).toBe(false);

    const log = await until('the log', async () => {
      const r = await t.request(`/api/v1/webhooks/${hook.id}/deliveries`, { key });
      const body = (await r.json()) as { deliveries: { id: string; status: string; response_body: string }[] };
      return body.deliveries[0]?.status === 'delivered' ? body.deliveries : undefined;
    });
    expect(log[0]?.id).toBe(got?.headers['webhook-id']);
    expect(log[0]?.response_body.length).toBeLessThanOrEqual(256);
    await t.request(`/api/v1/webhooks/${hook.id}`, { method: 'DELETE', key });
  });

  it('retries after a 500 and after a timeout, with the same webhook-id, then marks failed', async () => {
    const hook = await register(t.adminKey, { events: ['document.processed'], collection: 'seen' });
    answers = [{ status: 500 }, { status: 200, delayMs: 1_500 }, { status: 200 }];
    await upload('seen', 'b.txt');
    const attempts = await until('three attempts', () => (received.length >= 3 ? received : undefined));
    const ids = new Set(attempts.map((a) => a.headers['webhook-id']));
    expect(ids.size).toBe(1);
    const log = await until('delivered', async () => {
      const r = await t.request(`/api/v1/webhooks/${hook.id}/deliveries`);
      const body = (await r.json()) as { deliveries: { status: string; attempts: number }[] };
      return body.deliveries[0]?.status === 'delivered' ? body.deliveries[0] : undefined;
    });
    expect(log.attempts).toBe(3);

    // Always 500: after WEBHOOK_MAX_ATTEMPTS the delivery is failed, with the reason.
    answers = [{ status: 500 }, { status: 500 }, { status: 500 }];
    received = [];
    await upload('seen', 'c.txt');
    const failed = await until('failed', async () => {
      const r = await t.request(`/api/v1/webhooks/${hook.id}/deliveries`);
      const body = (await r.json()) as { deliveries: { status: string; attempts: number; last_error: string }[] };
      return body.deliveries.find((d) => d.status === 'failed');
    });
    expect(failed).toMatchObject({ attempts: 3, last_error: 'receiver answered 500' });
    await t.request(`/api/v1/webhooks/${hook.id}`, { method: 'DELETE' });
  });

  it('sends nothing for a collection the endpoint key may not use', async () => {
    // Registered for every collection, then restricted: the restriction holds at each event.
    const { id: keyId, key } = await t.createKey({ name: 'narrow', scopes: ['webhooks'] });
    const hook = await register(key, { events: ['document.processed'] });
    const narrowed = await t.request(`/api/v1/keys/${keyId}`, { method: 'PATCH', json: { collections: ['seen'] } });
    expect(narrowed.status).toBe(200);
    await upload('hidden', 'd.txt');
    const seenId = await upload('seen', 'e.txt');
    await until('the visible event', () => (events('document.processed').length ? true : undefined));
    await new Promise((r) => setTimeout(r, 700));
    const docs = events('document.processed').map((e) => e.payload.data.document_id);
    expect(docs).toEqual([seenId]);
    const refused = await t.request('/api/v1/webhooks', {
      method: 'POST',
      key,
      json: { url: receiverUrl, events: ['document.processed'], collection: 'hidden' },
    });
    expect(refused.status).toBe(404);
    // An endpoint for no collection is not one of the key's collections: an unrestricted admin removes it.
    expect((await t.request(`/api/v1/webhooks/${hook.id}`, { key })).status).toBe(404);
    expect((await t.request(`/api/v1/webhooks/${hook.id}`, { method: 'DELETE' })).status).toBe(200);
  });

  it('delivers document.deleted and collection.deleted, once each', async () => {
    const { id } = await createCollection(t, 'doomed');
    const hook = await register(t.adminKey, { events: ['document.deleted', 'collection.deleted'] });
    const docId = await upload('doomed', 'f.txt');
    await upload('doomed', 'g.txt');
    await t.request(`/api/v1/rag/documents/${docId}`, { method: 'DELETE' });
    await t.request('/api/v1/rag/collections/doomed', { method: 'DELETE' });
    await until('both events', () => (received.length >= 2 ? true : undefined));
    expect(events('document.deleted')[0]?.payload.data).toMatchObject({ document_id: docId, collection: 'doomed' });
    expect(events('collection.deleted')[0]?.payload.data).toMatchObject({ collection: 'doomed', collection_id: id });
    // The purger deleting g.txt and then the collection's row announces neither again.
    await until('the collection purged', async () => {
      const [row] = await queryRows<{ n: number }>(
        t.database.db,
        sql`select count(*)::int as n from collections where id = ${id}`,
      );
      return row?.n === 0;
    });
    const queued = await queryRows<{ event: string }>(
      t.database.db,
      sql`select event from webhook_deliveries where endpoint_id = ${hook.id} order by event`,
    );
    expect(queued.map((d) => d.event)).toEqual(['collection.deleted', 'document.deleted']);
    await t.request(`/api/v1/webhooks/${hook.id}`, { method: 'DELETE' });
  });

  it("an endpoint follows its collection's name, as keys and chatbots do: before it exists and once created again", async () => {
    const hook = await register(t.adminKey, {
      events: ['document.processed', 'collection.deleted'],
      collection: 'reborn',
    });
    const first = await createCollection(t, 'reborn');
    const before = await upload('reborn', 'h.txt');
    await until('the first event', () => (events('document.processed').length ? true : undefined));
    await t.request('/api/v1/rag/collections/reborn', { method: 'DELETE' });
    const deleted = await until('collection.deleted', () => events('collection.deleted')[0]);
    expect(deleted.payload.data).toEqual({ collection: 'reborn', collection_id: first.id });
    const second = await createCollection(t, 'reborn');
    expect(second.id).not.toBe(first.id);
    const after = await upload('reborn', 'i.txt');
    await until('the second event', () => (events('document.processed').length >= 2 ? true : undefined));
    expect(events('document.processed').map((e) => e.payload.data.document_id)).toEqual([before, after]);
    await t.request(`/api/v1/webhooks/${hook.id}`, { method: 'DELETE' });
    await t.request('/api/v1/rag/collections/reborn', { method: 'DELETE' });
  });

  it('a delivery leased by a worker that died is sent again, with the same id; redeliver sends it once more', async () => {
    const hook = await register(t.adminKey, { events: ['document.processed'] });
    // What a worker killed mid-send leaves: an attempt counted, a lease that will expire.
    await t.database.db.execute(sql`insert into webhook_deliveries
      (id, endpoint_id, event, payload, attempts, lease_owner, lease_expires_at)
      values ('evt_orphan', ${hook.id}, 'document.processed', '{"type": "document.processed", "data": {}}', 1,
              'whs_dead', now() + interval '300 milliseconds')`);
    const got = await until('the resend', () => received.find((r) => r.headers['webhook-id'] === 'evt_orphan'));
    expect(got.body).toContain('document.processed');
    received = [];
    const again = await t.request(`/api/v1/webhooks/${hook.id}/deliveries/evt_orphan/redeliver`, { method: 'POST' });
    expect(again.status).toBe(202);
    await until('the redelivery', () => received.find((r) => r.headers['webhook-id'] === 'evt_orphan'));
    await t.request(`/api/v1/webhooks/${hook.id}`, { method: 'DELETE' });
  });

  it('validates endpoints and needs WEBHOOK_SIGNING_KEY', async () => {
    const bad = await t.request('/api/v1/webhooks', {
      method: 'POST',
      json: { url: 'ftp://example.com/x', events: ['document.processed'] },
    });
    expect(bad.status).toBe(400);
    const unknown = await t.request('/api/v1/webhooks', {
      method: 'POST',
      json: { url: receiverUrl, events: ['document.exploded'] },
    });
    expect(unknown.status).toBe(400);
    const plain = await startTestApp({ config: { webhooks: webhookConfig({ signingKey: undefined }) } });
    try {
      const r = await plain.request('/api/v1/webhooks', {
        method: 'POST',
        json: { url: receiverUrl, events: ['document.processed'] },
      });
      expect(r.status).toBe(503);
      expect(JSON.stringify(await r.json())).toContain('WEBHOOK_SIGNING_KEY');
      // A state the operator chose, not a fault: one warning saying why, no error with a stack.
      const logged = plain.logs.filter(
        (l) => l.msg === 'request refused: service unavailable' || l.msg === 'request failed',
      );
      expect(logged).toEqual([
        expect.objectContaining({
          level: 40,
          code: 'service_unavailable',
          reason: expect.stringContaining('WEBHOOK_SIGNING_KEY'),
        }),
      ]);
    } finally {
      await plain.close();
    }
  });
});

describe('SSRF', () => {
  it('refuses loopback, private, link-local and mapped addresses unless allowed', async () => {
    for (const a of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '::1',
      'fe80::1',
      'fd00::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '0.0.0.0',
      '100.64.0.1',
      '::7f00:1',
      '2002:7f00:1::',
      '64:ff9b:1::7f00:1',
      '2001:0:4136:e378:8000:63bf:3fff:fdd2',
    ]) {
      expect(isPublicAddress(a), a).toBe(false);
    }
    for (const a of ['93.184.216.34', '2606:4700::1111', '8.8.8.8']) expect(isPublicAddress(a), a).toBe(true);

    const strict = await startTestApp({ config: { webhooks: webhookConfig({ allowPrivateTargets: false }) } });
    try {
      await createCollection(strict, 'ssrf');
      // A host name is registered and checked at each delivery (a loopback literal is refused at
      // once: webhooks.security.test.ts).
      const r = await strict.request('/api/v1/webhooks', {
        method: 'POST',
        json: { url: receiverUrl.replace('127.0.0.1', 'localhost'), events: ['document.processed'] },
      });
      expect(r.status).toBe(201);
      const hook = (await r.json()) as { id: string };
      const up = await strict.request('/api/v1/rag/collections/ssrf/documents', {
        method: 'POST',
        json: { name: 'x.txt', content: 'SSRF test.' },
      });
      await waitForDocument(strict, ((await up.json()) as { id: string }).id);
      const attempt = await until('a refused attempt', async () => {
        const log = await strict.request(`/api/v1/webhooks/${hook.id}/deliveries`);
        const body = (await log.json()) as { deliveries: { attempts: number; last_error: string | null }[] };
        return body.deliveries[0]?.last_error ? body.deliveries[0] : undefined;
      });
      expect(attempt.last_error).toMatch(/^refused: .*non-public address/);
      expect(received).toEqual([]);
    } finally {
      await strict.close();
    }
  });
});
