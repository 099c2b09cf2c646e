import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { gatewayConfigFrom } from '../../src/gateway/providers/config.ts';
import type { ChatProvider } from '../../src/gateway/providers/provider.ts';
import { createRegistry } from '../../src/gateway/registry.ts';

const stub = (name: string): ChatProvider => ({
  name,
  embeddingBatchSize: 1,
  complete: () => Promise.reject(new Error('unused')),
  stream: () => Promise.reject(new Error('unused')),
  embed: () => Promise.reject(new Error('unused')),
  rerank: () => Promise.reject(new Error('unused')),
  listModels: () => Promise.resolve([]),
  close: () => Promise.resolve(),
});

describe('provider order', () => {
  it('tries lower priorities first and shares equal priorities by weight', async () => {
    const registry = createRegistry({
      config: gatewayConfigFrom({
        providers: [
          { name: 'backup', base_url: 'http://127.0.0.1:1/v1', models: ['m'], priority: 9 },
          { name: 'heavy', base_url: 'http://127.0.0.1:2/v1', models: ['m'], weight: 3 },
          { name: 'light', base_url: 'http://127.0.0.1:3/v1', models: ['m'], weight: 1 },
        ],
      }),
      createProvider: (p) => stub(p.name),
      clock: Date.now,
      logger: pino({ level: 'silent' }),
    });
    const firsts = { heavy: 0, light: 0 };
    for (let i = 0; i < 4_000; i++) {
      const order = (await registry.candidates('m', 'chat')).map((c) => c.provider.name);
      expect(order).toHaveLength(3);
      expect(order[2]).toBe('backup');
      firsts[order[0] as 'heavy' | 'light']++;
    }
    // 3:1 expected; the bounds are many standard deviations wide.
    expect(firsts.heavy / firsts.light).toBeGreaterThan(2.4);
    expect(firsts.heavy / firsts.light).toBeLessThan(3.8);
  });
});

describe('model discovery', () => {
  it('refreshes as often as models_cache_ttl_ms says, under 15 s too; after a failure, retries every 15 s', async () => {
    let now = Date.UTC(2026, 10, 28);
    let listed = ['m1'];
    let failing = false;
    let calls = 0;
    const provider: ChatProvider = {
      ...stub('disc'),
      listModels: () => {
        calls += 1;
        return failing
          ? Promise.reject(new Error('down'))
          : Promise.resolve(listed.map((id) => ({ id, object: 'model' as const, created: 0, owned_by: 'x' })));
      },
    };
    const registry = createRegistry({
      config: gatewayConfigFrom({
        providers: [{ name: 'disc', base_url: 'http://127.0.0.1:1/v1', models_cache_ttl_ms: 5_000 }],
      }),
      createProvider: () => provider,
      clock: () => now,
      logger: pino({ level: 'silent' }),
    });
    const served = async () => {
      await registry.candidates('m1', 'chat'); // refreshes a stale list in the background
      await new Promise((resolve) => setImmediate(resolve));
      return (await registry.candidates('m2', 'chat')).length > 0;
    };
    expect(await served()).toBe(false);
    listed = ['m1', 'm2'];
    now += 5_000;
    // Before, the list waited for 15 s whatever the ttl.
    expect(await served()).toBe(true);
    expect(calls).toBe(2);
    failing = true;
    now += 5_000;
    await served();
    expect(calls).toBe(3);
    now += 5_000;
    await served();
    expect(calls).toBe(3); // a failed refresh is retried after 15 s, not at every request
    now += 10_000;
    await served();
    expect(calls).toBe(4);
  });
});
