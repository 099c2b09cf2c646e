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
