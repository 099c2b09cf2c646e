import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

let discovered: MockUpstream;
let down: MockUpstream;
let t: TestApp;

beforeAll(async () => {
  discovered = await startMockUpstream({ models: ['disc-chat', 'text-embedding-3-small', 'whisper-1'] });
  down = await startMockUpstream({ models: ['down-chat'], modelsStatus: 500 });
  t = await startTestApp({
    gateway: {
      providers: [
        {
          name: 'listed',
          base_url: 'http://127.0.0.1:9/v1',
          models: ['listed-chat', 'disc-chat', 'meta-llama/Llama-3.1-8B'],
          priority: 5,
        },
        { name: 'discovered', base_url: discovered.url },
        { name: 'down', base_url: down.url },
      ],
      aliases: { smart: 'disc-chat', dangling: 'nowhere' },
    },
  });
});
afterAll(async () => {
  await t.close();
  await discovered.close();
  await down.close();
});

describe('GET /api/v1/models', () => {
  it('lists the chat models of every provider, survives a provider that is down, caches discovery', async () => {
    const response = await t.request('/api/v1/models');
    expect(response.status).toBe(200);
    const list = (await response.json()) as { object: string; data: Record<string, unknown>[] };
    expect(list.object).toBe('list');
    expect(list.data).toEqual([
      { id: 'disc-chat', object: 'model', created: 1_700_000_000, owned_by: 'discovered' },
      { id: 'listed-chat', object: 'model', created: expect.any(Number), owned_by: 'listed' },
      { id: 'meta-llama/Llama-3.1-8B', object: 'model', created: expect.any(Number), owned_by: 'listed' },
      { id: 'smart', object: 'model', created: 1_700_000_000, owned_by: 'discovered' },
    ]);
    expect((await t.request('/api/v1/models')).status).toBe(200);
    const modelCalls = (m: MockUpstream) => m.requests.filter((r) => r.path === '/v1/models').length;
    expect(modelCalls(discovered)).toBe(1);
    expect(modelCalls(down)).toBe(1);
  });

  it('routes discovered models and their aliases; a model of a provider that is down is unknown', async () => {
    const chat = (model: string) =>
      t.request('/api/v1/chat/completions', {
        method: 'POST',
        json: { model, messages: [{ role: 'user', content: 'x' }] },
      });
    expect((await chat('smart')).status).toBe(200);
    expect(discovered.requests.at(-1)?.body?.model).toBe('disc-chat');
    expect((await chat('down-chat')).status).toBe(404);
    expect((await chat('dangling')).status).toBe(404);
  });

  it('GET /api/v1/models/{id}: one entry of the list (ids with slashes too), else model_not_found', async () => {
    const one = await t.request('/api/v1/models/smart');
    expect(one.status).toBe(200);
    expect(await one.json()).toEqual({ id: 'smart', object: 'model', created: 1_700_000_000, owned_by: 'discovered' });
    for (const path of ['meta-llama/Llama-3.1-8B', 'meta-llama%2FLlama-3.1-8B']) {
      const slashed = await t.request(`/api/v1/models/${path}`);
      expect(slashed.status, path).toBe(200);
      expect(((await slashed.json()) as { id: string }).id).toBe('meta-llama/Llama-3.1-8B');
    }
    const missing = await t.request('/api/v1/models/down-chat');
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: unknown }).error).toMatchObject({
      code: 'model_not_found',
      param: 'model',
      message: "The model 'down-chat' does not exist",
    });
    // The official client's models.retrieve.
    const client = new OpenAI({ apiKey: t.adminKey, baseURL: `${t.url}/api/v1` });
    expect((await client.models.retrieve('meta-llama/Llama-3.1-8B')).owned_by).toBe('listed');
    await expect(client.models.retrieve('nope')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('needs the read scope', async () => {
    const chatOnly = await t.createKey({ name: 'c', scopes: ['chat'] });
    expect((await t.request('/api/v1/models', { key: chatOnly.key })).status).toBe(403);
    expect((await t.request('/api/v1/models', { key: null })).status).toBe(401);
    expect((await t.request('/api/v1/models/smart', { key: chatOnly.key })).status).toBe(403);
    expect((await t.request('/api/v1/models/smart', { key: null })).status).toBe(401);
  });
});
