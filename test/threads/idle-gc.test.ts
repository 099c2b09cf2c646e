/**
 * Each worker thread takes `gc` by turning the process-wide --expose-gc flag on and off around a
 * new context. The bulk embedding lane starts its model threads together: one thread turned the
 * flag off between another's two steps, and that thread failed to start ("gc is not defined").
 */
import { runInNewContext } from 'node:vm';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';

const program = `
  import { parentPort } from 'node:worker_threads';
  const { createIdleCollector } = await import(${JSON.stringify(new URL('../../src/threads/idle-gc.ts', import.meta.url).href)});
  const collectors = [];
  for (let i = 0; i < 200; i++) collectors.push(createIdleCollector(1));
  const c = collectors[0];
  c.busy();
  c.idle();
  await new Promise((resolve) => setTimeout(resolve, 20));
  parentPort.postMessage({ ok: true });
`;

describe('idle garbage collection in worker threads', () => {
  it('threads starting together all get their collector, and gc stays hidden from new contexts', async () => {
    const results = await Promise.all(
      Array.from(
        { length: 6 },
        () =>
          new Promise<unknown>((resolve, reject) => {
            const worker = new Worker(program, { eval: true, type: 'module' } as never);
            worker.once('message', (m) => {
              resolve(m);
              void worker.terminate();
            });
            worker.once('error', reject);
          }),
      ),
    );
    expect(results).toEqual(Array.from({ length: 6 }, () => ({ ok: true })));
    // Once they have all started, a new context (a sandboxed program's) has no gc.
    expect(runInNewContext('typeof gc')).toBe('undefined');
  });
});
