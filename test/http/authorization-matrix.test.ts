/**
 * The authorisation matrix: every /api/v1 route that needs a key × every way a caller can be
 * refused. Generated from the app's own route table, so a route added without a fixture here
 * fails the first test instead of silently escaping the matrix.
 */
import { loadConfig } from '../../src/config.ts';
import { afterAll, describe, expect, it } from 'vitest';
import { scopes, type Scope } from '../../src/keys/principal.ts';
import { mockGateway } from '../chatbots/chatbots.support.ts';
import { startTestApp } from '../support/app.ts';
import { fakeClock } from '../support/clock.ts';
import { authError } from '../support/http.ts';
import { startMockUpstream } from '../support/mock-upstream.ts';

const clock = fakeClock();
const mock = await startMockUpstream({ models: ['mock-chat'] });
const t = await startTestApp({
  clock,
  config: {
    unauthenticatedPerMinute: 1_000_000,
    webhooks: { ...loadConfig({}).webhooks, signingKey: 'matrix-signing-key-0123456789abcdef' },
  },
  gateway: mockGateway(mock),
});
afterAll(async () => {
  await t.close();
  await mock.close();
});

const TARGET = 'matrix_target';
const OTHER = 'matrix_other';

async function must(response: Response, status: number): Promise<Record<string, unknown>> {
  const text = await response.text();
  if (response.status !== status) throw new Error(`expected ${status}, got ${response.status}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

// The world the requests act on: a collection the restricted key may not use and one it may, a
// document in the first, and keys to manage.
for (const name of [TARGET, OTHER])
  await must(await t.request('/api/v1/rag/collections', { method: 'POST', json: { name } }), 201);
const document = await must(
  await t.request(`/api/v1/rag/collections/${TARGET}/documents`, {
    method: 'POST',
    json: { name: 'matrix.txt', content: 'The authorisation matrix document.' },
  }),
  202,
);
const throwawayKey = async () => (await t.createKey({ name: 'throwaway', scopes: ['read'] })).id;

// A chatbot over the target collection, owned by a key without admin, with one conversation.
const nonAdmin = scopes.filter((s) => s !== 'admin');
const owner = await t.createKey({ name: 'owner', scopes: nonAdmin });
const stranger = await t.createKey({ name: 'stranger', scopes: nonAdmin });
const newBot = async () =>
  must(
    await t.request('/api/v1/chatbot/create', {
      method: 'POST',
      key: owner.key,
      json: { name: 'matrix', model: 'mock-chat', use_rag: true, rag_collection: TARGET },
    }),
    201,
  );
const bot = await newBot();
const turn = await must(
  await t.request(`/api/v1/chatbot/external/${String(bot.id)}/chat`, {
    method: 'POST',
    key: owner.key,
    json: { message: 'hello' },
  }),
  200,
);

// A webhook endpoint for the target collection, registered by an unrestricted admin. Its host
// never resolves: nothing is sent anywhere.
const newHook = async () =>
  must(
    await t.request('/api/v1/webhooks', {
      method: 'POST',
      json: { url: 'https://receiver.invalid/hook', events: ['document.processed'], collection: TARGET },
    }),
    201,
  );
const hook = await newHook();

type Shape = 'structured' | 'simple';
/** What a key restricted to another collection gets: a refusal, or the same as an unrestricted key. */
type Restricted = { status: number; body: unknown } | 'unaffected';
interface Fixture {
  request: () => Promise<{ url: string; body?: unknown }>;
  /** Error shape of this route (contract.md: 401/403/429 are always structured). */
  shape: Shape;
  restricted: Restricted;
  /** Chatbot routes: what a key other than the chatbot's owner gets (an admin's restriction applies too). */
  foreign?: { status: number; body: unknown };
}

const simple = (message: string) => ({ error: message });
const collectionNotFound = { status: 404, body: simple('Collection not found') };
const documentNotFound = { status: 404, body: simple('Document not found') };
const chatbotNotFound = { status: 404, body: simple('Chatbot not found') };
const webhookNotFound = { status: 404, body: simple('Webhook not found') };
const structuredNotFound = (message: string) => ({
  status: 404,
  body: { error: { message, type: 'not_found_error', code: 'not_found' } },
});
const fixed = (url: string, body?: unknown) => async () => ({ url, ...(body === undefined ? {} : { body }) });
const keyRoute = (suffix: string, body?: unknown) => async () => ({
  url: `/api/v1/keys/${await throwawayKey()}${suffix}`,
  ...(body === undefined ? {} : { body }),
});

// Key management keeps a key's restriction: keys beyond it are missing, a key without one is refused.
const keyNotFound = structuredNotFound('API key not found');
const fixtures: Record<string, Fixture> = {
  'POST /api/v1/keys': {
    request: fixed('/api/v1/keys', { name: 'm', scopes: ['read'], tier: 'standard' }),
    shape: 'structured',
    restricted: {
      status: 403,
      body: {
        error: {
          message:
            'This API key is restricted to collections: a key it creates or changes must be restricted to at least one of them',
          type: 'permission_error',
          code: 'insufficient_scope',
          param: 'collections',
        },
      },
    },
  },
  'GET /api/v1/keys': { request: fixed('/api/v1/keys'), shape: 'structured', restricted: 'unaffected' },
  'GET /api/v1/keys/:id': { request: keyRoute(''), shape: 'structured', restricted: keyNotFound },
  'PATCH /api/v1/keys/:id': {
    request: keyRoute('', { name: 'renamed' }),
    shape: 'structured',
    restricted: keyNotFound,
  },
  'DELETE /api/v1/keys/:id': { request: keyRoute(''), shape: 'structured', restricted: keyNotFound },
  'POST /api/v1/keys/:id/rotate': { request: keyRoute('/rotate'), shape: 'structured', restricted: keyNotFound },
  'GET /api/v1/keys/:id/usage': { request: keyRoute('/usage'), shape: 'structured', restricted: keyNotFound },

  'POST /api/v1/rag/collections': {
    request: fixed('/api/v1/rag/collections', { name: 'matrix_new' }),
    shape: 'simple',
    restricted: {
      status: 403,
      body: {
        error: {
          message: "This API key may not use collection 'matrix_new'",
          type: 'permission_error',
          code: 'insufficient_scope',
        },
      },
    },
  },
  'GET /api/v1/rag/collections': {
    request: fixed('/api/v1/rag/collections'),
    shape: 'simple',
    restricted: 'unaffected',
  },
  'GET /api/v1/rag/collections/:collection_name': {
    request: fixed(`/api/v1/rag/collections/${TARGET}`),
    shape: 'simple',
    restricted: collectionNotFound,
  },
  'PUT /api/v1/rag/collections/:collection_name': {
    request: fixed(`/api/v1/rag/collections/${TARGET}`, { description: 'changed' }),
    shape: 'simple',
    restricted: collectionNotFound,
  },
  'DELETE /api/v1/rag/collections/:collection_name': {
    request: fixed(`/api/v1/rag/collections/${TARGET}`),
    shape: 'simple',
    restricted: collectionNotFound,
  },
  'POST /api/v1/rag/collections/:collection_name/documents': {
    request: fixed(`/api/v1/rag/collections/${TARGET}/documents`, { name: 'other.txt', content: 'other text' }),
    shape: 'simple',
    restricted: collectionNotFound,
  },
  'GET /api/v1/rag/collections/:collection_name/documents': {
    request: fixed(`/api/v1/rag/collections/${TARGET}/documents`),
    shape: 'simple',
    restricted: collectionNotFound,
  },
  'GET /api/v1/rag/documents/:document_id': {
    request: fixed(`/api/v1/rag/documents/${String(document.id)}`),
    shape: 'simple',
    restricted: documentNotFound,
  },
  'PUT /api/v1/rag/documents/:document_id': {
    request: fixed(`/api/v1/rag/documents/${String(document.id)}`, { description: 'changed' }),
    shape: 'simple',
    restricted: documentNotFound,
  },
  'POST /api/v1/rag/documents/:document_id/cancel': {
    request: fixed(`/api/v1/rag/documents/${String(document.id)}/cancel`),
    shape: 'simple',
    restricted: documentNotFound,
  },
  'DELETE /api/v1/rag/documents/:document_id': {
    request: fixed(`/api/v1/rag/documents/${String(document.id)}`),
    shape: 'simple',
    restricted: documentNotFound,
  },

  'POST /api/v1/agent/tool-calling': {
    request: fixed('/api/v1/agent/tool-calling', {
      tool_name: 'rag_search',
      parameters: { query: 'authorisation', collection: TARGET },
    }),
    shape: 'simple',
    restricted: collectionNotFound,
  },
  'POST /api/v1/embeddings': {
    request: fixed('/api/v1/embeddings', { model: 'text-embedding-ada-002', input: 'hello' }),
    shape: 'structured',
    restricted: 'unaffected',
  },
  'POST /api/v1/rerank': {
    request: fixed('/api/v1/rerank', { model: 'no-such-reranker', query: 'q', documents: ['d'] }),
    shape: 'structured',
    restricted: 'unaffected',
  },
  'POST /api/v2/rerank': {
    request: fixed('/api/v2/rerank', { model: 'no-such-reranker', query: 'q', documents: ['d'] }),
    shape: 'structured',
    restricted: 'unaffected',
  },
  'POST /api/v1/webhooks': {
    request: fixed('/api/v1/webhooks', {
      url: 'https://example.com/hook',
      events: ['document.processed'],
      collection: TARGET,
    }),
    shape: 'simple',
    restricted: collectionNotFound,
  },
  'GET /api/v1/webhooks': { request: fixed('/api/v1/webhooks'), shape: 'simple', restricted: 'unaffected' },
  // Endpoints of a collection a restricted key may not use are missing to it, an admin's too.
  'GET /api/v1/webhooks/:webhook_id': {
    request: fixed(`/api/v1/webhooks/${String(hook.id)}`),
    shape: 'simple',
    restricted: webhookNotFound,
  },
  'DELETE /api/v1/webhooks/:webhook_id': {
    request: async () => ({ url: `/api/v1/webhooks/${String((await newHook()).id)}` }),
    shape: 'simple',
    restricted: webhookNotFound,
  },
  'GET /api/v1/webhooks/:webhook_id/deliveries': {
    request: fixed(`/api/v1/webhooks/${String(hook.id)}/deliveries`),
    shape: 'simple',
    restricted: webhookNotFound,
  },
  'POST /api/v1/webhooks/:webhook_id/deliveries/:delivery_id/redeliver': {
    request: fixed(`/api/v1/webhooks/${String(hook.id)}/deliveries/evt_missing/redeliver`),
    shape: 'simple',
    restricted: webhookNotFound,
  },
  'POST /api/v1/chat/completions': {
    request: fixed('/api/v1/chat/completions', { model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
    shape: 'structured',
    restricted: 'unaffected',
  },
  'GET /api/v1/models': { request: fixed('/api/v1/models'), shape: 'structured', restricted: 'unaffected' },
  'GET /api/v1/models/*': { request: fixed('/api/v1/models/mock-chat'), shape: 'structured', restricted: 'unaffected' },
  // Whatever the database (409 here: no embedded data directory), a restricted key takes no backup.
  'GET /api/v1/backup': {
    request: fixed('/api/v1/backup'),
    shape: 'structured',
    restricted: {
      status: 403,
      body: {
        error: {
          message: 'A key restricted to collections cannot take a backup: it holds every collection',
          type: 'permission_error',
          code: 'insufficient_scope',
        },
      },
    },
  },

  'POST /api/v1/chatbot/create': {
    request: fixed('/api/v1/chatbot/create', {
      name: 'created',
      model: 'mock-chat',
      use_rag: true,
      rag_collection: TARGET,
    }),
    shape: 'simple',
    restricted: collectionNotFound,
  },
  'GET /api/v1/chatbot/list': { request: fixed('/api/v1/chatbot/list'), shape: 'simple', restricted: 'unaffected' },
  // The chatbot is over the target collection: missing to a restricted key, an admin's too.
  'GET /api/v1/chatbot/:chatbot_id': {
    request: fixed(`/api/v1/chatbot/${String(bot.id)}`),
    shape: 'simple',
    restricted: chatbotNotFound,
    foreign: chatbotNotFound,
  },
  'PUT /api/v1/chatbot/:chatbot_id': {
    request: fixed(`/api/v1/chatbot/${String(bot.id)}`, { rag_collection: TARGET }),
    shape: 'simple',
    restricted: chatbotNotFound,
    foreign: chatbotNotFound,
  },
  'DELETE /api/v1/chatbot/:chatbot_id': {
    // A fresh chatbot each time: the unrestricted comparison really deletes it.
    request: async () => ({ url: `/api/v1/chatbot/${String((await newBot()).id)}` }),
    shape: 'simple',
    restricted: chatbotNotFound,
    foreign: chatbotNotFound,
  },
  'GET /api/v1/chatbot/:chatbot_id/conversations': {
    request: fixed(`/api/v1/chatbot/${String(bot.id)}/conversations`),
    shape: 'simple',
    restricted: chatbotNotFound,
    foreign: chatbotNotFound,
  },
  'GET /api/v1/chatbot/conversations/:conversation_id': {
    request: fixed(`/api/v1/chatbot/conversations/${String(turn.conversation_id)}`),
    shape: 'simple',
    restricted: { status: 404, body: simple('Conversation not found') },
    foreign: { status: 404, body: simple('Conversation not found') },
  },
  'POST /api/v1/chatbot/external/:chatbot_id/chat/completions': {
    request: fixed(`/api/v1/chatbot/external/${String(bot.id)}/chat/completions`, {
      messages: [{ role: 'user', content: 'hello' }],
    }),
    shape: 'structured',
    restricted: structuredNotFound('Chatbot not found'),
    foreign: structuredNotFound('Chatbot not found'),
  },
  'POST /api/v1/chatbot/external/:chatbot_id/chat': {
    request: fixed(`/api/v1/chatbot/external/${String(bot.id)}/chat`, { message: 'hello again' }),
    shape: 'simple',
    restricted: chatbotNotFound,
    foreign: chatbotNotFound,
  },
};

const routes = t.app.routes.map((r) => ({ ...r, id: `${r.method} ${r.url}` }));
const bodyless = (method: string) => method === 'GET' || method === 'DELETE';

async function send(route: { method: string }, fixture: Fixture, key: string | null) {
  const { url, body } = await fixture.request();
  const response = await t.request(url, {
    method: route.method,
    key,
    ...(bodyless(route.method) ? {} : { json: body ?? {} }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as unknown) : undefined };
}

// Callers refused before their key is looked at, or refused for what their key is.
const revoked = await t.createKey({ name: 'revoked', scopes: ['admin'] });
await must(await t.request(`/api/v1/keys/${revoked.id}`, { method: 'DELETE' }), 200);
const expired = await t.createKey({
  name: 'expired',
  scopes: ['admin'],
  expires_at: new Date(clock() + 1000).toISOString(),
});
clock.advance(1000);
const withoutScope = new Map<Scope, string>();
for (const scope of scopes.filter((s) => s !== 'admin')) {
  const others = scopes.filter((s) => s !== scope && s !== 'admin');
  withoutScope.set(scope, (await t.createKey({ name: `no-${scope}`, scopes: others, tier: 'enterprise' })).key);
}
const restrictedKey = (await t.createKey({ name: 'restricted', scopes: ['admin'], collections: [OTHER] })).key;
const unrestrictedKey = (await t.createKey({ name: 'unrestricted', scopes: ['admin'] })).key;

const refusals: { name: string; key: () => string | null; expected: unknown }[] = [
  {
    name: 'no key',
    key: () => null,
    expected: authError('Missing API key: send the header Authorization: Bearer <key>'),
  },
  { name: 'malformed key', key: () => 'not-a-key', expected: authError('Invalid API key') },
  { name: 'unknown key', key: () => `rpk_${'Z'.repeat(40)}`, expected: authError('Invalid API key') },
  { name: 'revoked key', key: () => revoked.key, expected: authError('API key has been revoked') },
  { name: 'expired key', key: () => expired.key, expected: authError('API key has expired') },
];

describe('authorisation matrix', () => {
  it('has a fixture for every route in the route table, and no stale ones', () => {
    expect(routes.length).toBeGreaterThan(0);
    expect(routes.map((r) => r.id).sort()).toEqual(Object.keys(fixtures).sort());
  });

  describe.each(routes)('$id', (route) => {
    const fixture = fixtures[route.id] as Fixture;

    it.each(refusals)('$name → 401', async ({ key, expected }) => {
      const got = await send(route, fixture, key());
      expect(got).toEqual({ status: 401, body: expected });
    });

    it(`key without the route's scope → 403`, async () => {
      const access = route.access as Scope;
      // Key management needs admin, which implies every scope: any non-admin key lacks it.
      const key = access === 'admin' ? (withoutScope.get('read') as string) : (withoutScope.get(access) as string);
      const got = await send(route, fixture, key);
      expect(got).toEqual({
        status: 403,
        body: {
          error: {
            message: `This API key lacks the '${access}' scope required here`,
            type: 'permission_error',
            code: 'insufficient_scope',
          },
        },
      });
    });

    it('key restricted to another collection', async () => {
      const got = await send(route, fixture, restrictedKey);
      if (fixture.restricted === 'unaffected') {
        const free = await send(route, fixture, unrestrictedKey);
        expect(got.status).toBe(free.status);
        expect([401, 403]).not.toContain(got.status);
        if (route.id === 'GET /api/v1/rag/collections') {
          const names = (got.body as { collections: { name: string }[] }).collections.map((c) => c.name);
          expect(names).toEqual([OTHER]);
        }
        // Lists leave out what the restriction hides: the target's chatbots and webhooks.
        if (route.id === 'GET /api/v1/chatbot/list') {
          const ids = (got.body as { chatbots: { id: string }[] }).chatbots.map((b) => b.id);
          expect(ids).not.toContain(bot.id);
          expect(JSON.stringify(free.body)).toContain(String(bot.id));
        }
        if (route.id === 'GET /api/v1/webhooks') {
          const ids = (got.body as { webhooks: { id: string }[] }).webhooks.map((w) => w.id);
          expect(ids).not.toContain(hook.id);
          expect(JSON.stringify(free.body)).toContain(String(hook.id));
        }
      } else {
        expect(got).toEqual(fixture.restricted);
      }
    });

    it.runIf(fixture.foreign !== undefined)("another key's chatbot → 404", async () => {
      expect(await send(route, fixture, stranger.key)).toEqual(fixture.foreign);
      // Its owner is served.
      expect([200, 201]).toContain((await send(route, fixture, owner.key)).status);
    });
  });
});
