import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { sql } from '../../src/db/orm.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection } from '../support/documents.ts';
import { checkTarget } from '../../src/webhooks/target.ts';

// No delivery is sent here: the endpoints' hosts never resolve, and the logged deliveries are settled.
const URL_OF_RECEIVER = 'https://receiver.invalid/hook';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    config: {
      webhooks: {
        ...loadConfig({}).webhooks,
        signingKey: 'test-signing-key-0123456789abcdefghij',
        allowPrivateTargets: false,
      },
    },
  });
  await createCollection(t, 'seen');
  await createCollection(t, 'hidden');
}, 120_000);
afterAll(async () => {
  await t.close();
});

const register = (body: Record<string, unknown>, key?: string) =>
  t.request('/api/v1/webhooks', {
    method: 'POST',
    json: { url: URL_OF_RECEIVER, events: ['document.processed'], ...body },
    ...(key === undefined ? {} : { key }),
  });

async function registered(body: Record<string, unknown>, key?: string): Promise<string> {
  const response = await register(body, key);
  expect(response.status, await response.clone().text()).toBe(201);
  return ((await response.json()) as { id: string }).id;
}

describe('webhooks and keys restricted to collections', () => {
  it('a restricted key registers only for a collection it may use: none named is 403, another is missing', async () => {
    for (const scopes of [['webhooks'], ['admin']]) {
      const { key } = await t.createKey({ name: `narrow-${scopes[0]}`, scopes, collections: ['seen'] });
      for (const collection of [undefined, null]) {
        const refused = await register(collection === undefined ? {} : { collection }, key);
        expect(refused.status).toBe(403);
        expect(await refused.json()).toEqual({
          error: {
            message: 'This API key is restricted to collections: a webhook it registers must name one of them',
            type: 'permission_error',
            code: 'insufficient_scope',
            param: 'collection',
          },
        });
      }
      const hidden = await register({ collection: 'hidden' }, key);
      expect(hidden.status).toBe(404);
      expect(await hidden.json()).toEqual({ error: 'Collection not found' });
      await registered({ collection: 'seen' }, key);
    }
    // Unrestricted keys still register for every collection.
    const { key } = await t.createKey({ name: 'wide', scopes: ['webhooks'] });
    await registered({}, key);
  });

  it('a restricted admin sees and manages only endpoints of collections it may use', async () => {
    const onHidden = await registered({ collection: 'hidden' });
    const onEvery = await registered({});
    const { key: otherKey } = await t.createKey({ name: 'other', scopes: ['webhooks'] });
    const onSeen = await registered({ collection: 'seen' }, otherKey);
    for (const [id, collection] of [
      [onHidden, 'hidden'],
      [onSeen, 'seen'],
    ]) {
      await t.database.db.execute(sql`insert into webhook_deliveries (id, endpoint_id, event, payload, status)
        values (${`evt_${id}`}, ${id}, 'document.processed',
                ${JSON.stringify({ type: 'document.processed', data: { collection, name: `${collection}.txt` } })}::jsonb,
                'delivered')`);
    }
    const { key: restricted } = await t.createKey({ name: 'narrow-admin', scopes: ['admin'], collections: ['seen'] });

    const listed = await t.request('/api/v1/webhooks', { key: restricted });
    const ids = ((await listed.json()) as { webhooks: { id: string }[] }).webhooks.map((w) => w.id);
    expect(ids).toContain(onSeen);
    expect(ids).not.toContain(onHidden);
    expect(ids).not.toContain(onEvery);

    const missing = { status: 404, body: { error: 'Webhook not found' } };
    for (const id of [onHidden, onEvery]) {
      for (const [path, method] of [
        [`/api/v1/webhooks/${id}`, 'GET'],
        [`/api/v1/webhooks/${id}/deliveries`, 'GET'],
        [`/api/v1/webhooks/${id}/deliveries/evt_${id}/redeliver`, 'POST'],
        [`/api/v1/webhooks/${id}`, 'DELETE'],
      ] as const) {
        const response = await t.request(path, { method, key: restricted });
        expect({ status: response.status, body: await response.json() }, `${method} ${path}`).toEqual(missing);
      }
      // Still there for an unrestricted admin.
      expect((await t.request(`/api/v1/webhooks/${id}`)).status).toBe(200);
    }
    // Exactly as an endpoint that does not exist.
    const absent = await t.request('/api/v1/webhooks/whk_none', { key: restricted });
    expect({ status: absent.status, body: await absent.json() }).toEqual(missing);

    // Another key's endpoint of a collection it may use: seen and managed like any.
    const log = await t.request(`/api/v1/webhooks/${onSeen}/deliveries`, { key: restricted });
    expect(log.status).toBe(200);
    expect(((await log.json()) as { deliveries: { id: string }[] }).deliveries.map((d) => d.id)).toEqual([
      `evt_${onSeen}`,
    ]);
    expect((await t.request(`/api/v1/webhooks/${onSeen}`, { method: 'DELETE', key: restricted })).status).toBe(200);

    // An unrestricted admin sees every endpoint.
    const all = ((await (await t.request('/api/v1/webhooks')).json()) as { webhooks: { id: string }[] }).webhooks;
    expect(all.map((w) => w.id)).toEqual(expect.arrayContaining([onHidden, onEvery]));
  });
});

describe('webhook targets', () => {
  it("the lookup of a target's host ends with the attempt's deadline, answer or not", async () => {
    // A resolver that does not answer held attempts 10 s and more past WEBHOOK_TIMEOUT_MS.
    const deadline = new AbortController();
    const checking = checkTarget(new URL('http://receiver.example.com/hook'), false, deadline.signal);
    deadline.abort(new DOMException('timed out', 'TimeoutError'));
    expect(await checking).toEqual({ ok: false, reason: 'cannot resolve receiver.example.com: no answer in time' });
  });

  it('refuses an IP literal that is not public at registration, however it is spelled', async () => {
    for (const [url, address] of [
      ['http://10.0.0.1/', '10.0.0.1'],
      ['http://[::1]:18190/x', '::1'],
      ['http://169.254.169.254/', '169.254.169.254'],
      ['http://0.0.0.0:8080/', '0.0.0.0'],
      ['http://2130706433:8080/', '127.0.0.1'],
      ['http://0x7f.1:9/', '127.0.0.1'],
      ['http://0177.0.0.1/', '127.0.0.1'],
      ['http://127.0.0.1./', '127.0.0.1'],
      ['https://192.168.1.10/hook', '192.168.1.10'],
      ['http://[fd00::1]/', 'fd00::1'],
      ['http://[::ffff:127.0.0.1]/', '::ffff:7f00:1'],
      ['http://[::ffff:10.0.0.1]/', '::ffff:a00:1'],
    ]) {
      const response = await register({ url });
      expect(response.status, url).toBe(400);
      expect(await response.json(), url).toEqual({
        error: `url: ${address} is a non-public address; set WEBHOOK_ALLOW_PRIVATE_TARGETS=true to allow it`,
      });
    }
    // A public literal is accepted; a host name is checked at each delivery, where it resolves then.
    await registered({ url: 'https://93.184.216.34/hook' });
    await registered({ url: 'http://localhost:9/hook' });
  });
});
