import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeysRepository } from '../../src/keys/keys.repository.ts';
import type { KeyRecord } from '../../src/keys/keys.schemas.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection } from '../support/documents.ts';

// A key restricted to collections manages only keys restricted to some of them (itself included):
// key management must not be a way out of the restriction (docs/operations.md).
let t: TestApp;
let restricted: { id: string; key: string };
let unrestricted: { id: string; key: string };
let wider: { id: string; key: string };
beforeAll(async () => {
  t = await startTestApp();
  for (const name of ['c1', 'c2']) await createCollection(t, name);
  restricted = await t.createKey({ name: 'restricted', scopes: ['admin'], collections: ['c1'] });
  unrestricted = await t.createKey({ name: 'unrestricted', scopes: ['admin'] });
  wider = await t.createKey({ name: 'wider', scopes: ['admin'], collections: ['c1', 'c2'] });
});
afterAll(async () => {
  await t.close();
});

const as =
  (key: string) =>
  (path: string, init: RequestInit & { json?: unknown } = {}) =>
    t.request(path, { ...init, key });

const refused = (message: string) => ({
  error: { message, type: 'permission_error', code: 'insufficient_scope', param: 'collections' },
});
const unrestrictedRefusal = refused(
  'This API key is restricted to collections: a key it creates or changes must be restricted to at least one of them',
);
const keyNotFound = { error: { message: 'API key not found', type: 'not_found_error', code: 'not_found' } };

/** What the probe did next: every collection, and a backup of all of them. */
async function expectStillRestricted(key: string) {
  const call = as(key);
  expect((await call('/api/v1/rag/collections/c1')).status).toBe(200);
  const hidden = await call('/api/v1/rag/collections/c2');
  expect(hidden.status).toBe(404);
  expect(await hidden.json()).toEqual({ error: 'Collection not found' });
  expect((await call('/api/v1/backup')).status).toBe(403);
}

describe('a key restricted to collections cannot escape its restriction through key management', () => {
  it('cannot lift its own restriction (collections null) or widen it', async () => {
    const call = as(restricted.key);
    const lifted = await call(`/api/v1/keys/${restricted.id}`, { method: 'PATCH', json: { collections: null } });
    expect(lifted.status).toBe(403);
    expect(await lifted.json()).toEqual(unrestrictedRefusal);

    const widened = await call(`/api/v1/keys/${restricted.id}`, {
      method: 'PATCH',
      json: { name: 'sneaky', collections: ['c1', 'c2'] },
    });
    expect(widened.status).toBe(403);
    expect(await widened.json()).toEqual(refused("This API key may not use collection 'c2'"));

    // Nothing of a refused change was written.
    const self = (await (await t.request(`/api/v1/keys/${restricted.id}`)).json()) as KeyRecord;
    expect(self).toMatchObject({ name: 'restricted', collections: ['c1'] });
    await expectStillRestricted(restricted.key);
  });

  it('cannot create a key without a restriction, or with a collection outside its own', async () => {
    const call = as(restricted.key);
    for (const collections of [undefined, null]) {
      const response = await call('/api/v1/keys', {
        method: 'POST',
        json: { name: 'escape', scopes: ['admin'], ...(collections === undefined ? {} : { collections }) },
      });
      expect(response.status, `collections: ${String(collections)}`).toBe(403);
      expect(await response.json()).toEqual(unrestrictedRefusal);
    }
    const outside = await call('/api/v1/keys', {
      method: 'POST',
      json: { name: 'escape', scopes: ['read'], collections: ['c1', 'c2'] },
    });
    expect(outside.status).toBe(403);
    expect(await outside.json()).toEqual(refused("This API key may not use collection 'c2'"));
    const names = ((await (await t.request('/api/v1/keys')).json()) as { keys: KeyRecord[] }).keys.map((k) => k.name);
    expect(names).not.toContain('escape');
  });

  it('sees keys beyond its restriction as missing: get, update, revoke, rotate, usage', async () => {
    const call = as(restricted.key);
    for (const target of [unrestricted, wider]) {
      const attempts: [string, RequestInit & { json?: unknown }][] = [
        [`/api/v1/keys/${target.id}`, {}],
        [`/api/v1/keys/${target.id}`, { method: 'PATCH', json: { name: 'taken' } }],
        [`/api/v1/keys/${target.id}`, { method: 'PATCH', json: { collections: ['c1'] } }],
        [`/api/v1/keys/${target.id}/rotate`, { method: 'POST' }],
        [`/api/v1/keys/${target.id}/usage`, {}],
        [`/api/v1/keys/${target.id}`, { method: 'DELETE' }],
      ];
      for (const [path, init] of attempts) {
        const response = await call(path, init);
        expect(response.status, `${init.method ?? 'GET'} ${path}`).toBe(404);
        expect(await response.json()).toEqual(keyNotFound);
      }
      // Untouched: its secret still works, its record is as it was.
      expect((await t.request('/api/v1/keys', { key: target.key })).status).toBe(200);
      const record = (await (await t.request(`/api/v1/keys/${target.id}`)).json()) as KeyRecord;
      expect(record.name).not.toBe('taken');
    }
  });

  it('checks the restriction in the write itself: a key widened since it was read is not written', async () => {
    const repo = createKeysRepository(t.database.db);
    const k = await t.createKey({ name: 'moving', scopes: ['read'], collections: ['c1'] });
    expect((await repo.findLive(k.id, ['c1']))?.id).toBe(k.id);
    // Another admin lifts its restriction between a restricted manager's read and its write.
    expect((await t.request(`/api/v1/keys/${k.id}`, { method: 'PATCH', json: { collections: null } })).status).toBe(
      200,
    );
    expect(await repo.update(k.id, { name: 'late' }, ['c1'])).toBeUndefined();
    expect(await repo.replaceSecret(k.id, 'f'.repeat(64), 'rpk_late00', ['c1'])).toBeUndefined();
    expect(await repo.revoke(k.id, ['c1'])).toBe(false);
    expect(await repo.findLive(k.id, ['c1'])).toBeUndefined();
    expect(await repo.findLive(k.id, null)).toMatchObject({ name: 'moving', revokedAt: null });
    expect((await t.request('/api/v1/keys', { key: k.key })).status).toBe(403); // its secret unchanged
    // A key restricted to no collection at all manages no key, itself included; and a key
    // restricted to none is within no restricted manager's collections.
    const none = await t.createKey({ name: 'none', scopes: ['admin'], collections: [] });
    expect(await repo.listLive([])).toEqual([]);
    expect((await repo.listLive(['c1', 'c2'])).map((row) => row.id)).not.toContain(none.id);
    expect(await repo.findLive(none.id, ['c1'])).toBeUndefined();
  });

  it("cannot see, rotate or revoke a key restricted to no collection (another tenant's chat key), nor make one", async () => {
    // Before, [] fitted inside every restricted admin's collections: one tenant's admin listed,
    // rotated (keeping the new secret) and could revoke another tenant's chat key.
    const chatKey = await t.createKey({ name: 'tenant-2 chat', scopes: ['chat', 'embeddings'], collections: [] });
    const call = as(restricted.key);
    const listed = (await (await call('/api/v1/keys')).json()) as { keys: KeyRecord[] };
    expect(listed.keys.map((k) => k.id)).not.toContain(chatKey.id);
    for (const [path, method] of [
      [`/api/v1/keys/${chatKey.id}`, 'GET'],
      [`/api/v1/keys/${chatKey.id}/rotate`, 'POST'],
      [`/api/v1/keys/${chatKey.id}/usage`, 'GET'],
      [`/api/v1/keys/${chatKey.id}`, 'DELETE'],
    ] as const) {
      const response = await call(path, { method });
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(await response.json()).toEqual(keyNotFound);
    }
    const patched = await call(`/api/v1/keys/${chatKey.id}`, { method: 'PATCH', json: { name: 'mine' } });
    expect(patched.status).toBe(404);
    const embedded = await t.request('/api/v1/embeddings', {
      method: 'POST',
      key: chatKey.key,
      json: { model: 'text-embedding-ada-002', input: 'still works' },
    });
    expect(embedded.status).toBe(200); // its secret untouched
    const made = await call('/api/v1/keys', {
      method: 'POST',
      json: { name: 'none', scopes: ['chat'], collections: [] },
    });
    expect(made.status).toBe(403);
    expect(await made.json()).toEqual(unrestrictedRefusal);
  });

  it('lists only the keys within its restriction', async () => {
    const listed = (await (await as(restricted.key)('/api/v1/keys')).json()) as { keys: KeyRecord[] };
    const ids = listed.keys.map((k) => k.id);
    expect(ids).toContain(restricted.id);
    expect(ids).not.toContain(unrestricted.id);
    expect(ids).not.toContain(wider.id);
    expect(listed.keys.every((k) => k.collections !== null && k.collections.every((c) => c === 'c1'))).toBe(true);
  });
});

describe('what a restricted key may still do', () => {
  it('creates a key for some of its collections, and manages it', async () => {
    const call = as(restricted.key);
    const response = await call('/api/v1/keys', {
      method: 'POST',
      json: { name: 'child', scopes: ['read'], collections: ['c1'] },
    });
    expect(response.status).toBe(201);
    const child = (await response.json()) as KeyRecord & { key: string };
    expect(child.collections).toEqual(['c1']);
    expect((await call('/api/v1/keys')).status).toBe(200);
    expect(((await (await call('/api/v1/keys')).json()) as { keys: KeyRecord[] }).keys.map((k) => k.id)).toContain(
      child.id,
    );
    // The child is as restricted as it was made.
    expect((await as(child.key)('/api/v1/rag/collections/c1')).status).toBe(200);
    expect((await as(child.key)('/api/v1/rag/collections/c2')).status).toBe(404);

    const renamed = await call(`/api/v1/keys/${child.id}`, { method: 'PATCH', json: { name: 'child-2' } });
    expect(renamed.status).toBe(200);
    expect(await renamed.json()).toMatchObject({ name: 'child-2', collections: ['c1'] });
    // Narrowed to none, it would be out of every restricted manager's reach, its own included.
    const none = await call(`/api/v1/keys/${child.id}`, { method: 'PATCH', json: { collections: [] } });
    expect(none.status).toBe(403);
    expect(await none.json()).toEqual(unrestrictedRefusal);
    expect((await call(`/api/v1/keys/${child.id}/usage`)).status).toBe(200);
    const rotated = await call(`/api/v1/keys/${child.id}/rotate`, { method: 'POST' });
    expect(rotated.status).toBe(200);
    const { key: newSecret } = (await rotated.json()) as { key: string };
    expect((await as(newSecret)('/api/v1/rag/collections/c1')).status).toBe(200);
    expect((await as(child.key)('/api/v1/rag/collections/c1')).status).toBe(401); // the old secret
    const revoked = await call(`/api/v1/keys/${child.id}`, { method: 'DELETE' });
    expect(revoked.status).toBe(200);
  });

  it('changes its own fields other than widening, and rotates itself', async () => {
    const self = await t.createKey({ name: 'self', scopes: ['admin'], collections: ['c1', 'c2'] });
    const call = as(self.key);
    const renamed = await call(`/api/v1/keys/${self.id}`, { method: 'PATCH', json: { name: 'self-2' } });
    expect(renamed.status).toBe(200);
    const narrowed = await call(`/api/v1/keys/${self.id}`, { method: 'PATCH', json: { collections: ['c1'] } });
    expect(narrowed.status).toBe(200);
    expect(await narrowed.json()).toMatchObject({ name: 'self-2', collections: ['c1'] });
    // Narrowed, it cannot come back.
    const back = await call(`/api/v1/keys/${self.id}`, { method: 'PATCH', json: { collections: ['c1', 'c2'] } });
    expect(back.status).toBe(403);
    const rotated = await call(`/api/v1/keys/${self.id}/rotate`, { method: 'POST' });
    expect(rotated.status).toBe(200);
    await expectStillRestricted(((await rotated.json()) as { key: string }).key);
  });
});

describe('an unrestricted admin key is unaffected', () => {
  it('sees, changes and rotates every key, restricted or not, and lifts restrictions', async () => {
    const call = as(unrestricted.key);
    const target = await t.createKey({ name: 'target', scopes: ['read'], collections: ['c2'] });
    const listed = ((await (await call('/api/v1/keys')).json()) as { keys: KeyRecord[] }).keys.map((k) => k.id);
    expect(listed).toEqual(expect.arrayContaining([restricted.id, unrestricted.id, wider.id, target.id]));
    const lifted = await call(`/api/v1/keys/${target.id}`, { method: 'PATCH', json: { collections: null } });
    expect(lifted.status).toBe(200);
    expect(await lifted.json()).toMatchObject({ collections: null });
    expect((await call(`/api/v1/keys/${wider.id}/usage`)).status).toBe(200);
    const created = await call('/api/v1/keys', { method: 'POST', json: { name: 'free', scopes: ['read'] } });
    expect(created.status).toBe(201);
    expect((await call(`/api/v1/keys/${target.id}/rotate`, { method: 'POST' })).status).toBe(200);
  });
});
