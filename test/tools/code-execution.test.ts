import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './code-execution.support.ts';

describe('code_execution requests', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ uidBase: 63_000, concurrency: 1, queueSize: 0 });
  });
  afterAll(async () => h.t.close());

  it('defaults to Python and answers the whole result', async () => {
    const response = await h.call({ code: 'print("hi")' });
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ output: 'hi\n', exit_code: 0, timed_out: false, truncated: false });
    expect(typeof body.duration_ms).toBe('number');
  });

  it('only a malformed request is a 400', async () => {
    for (const parameters of [
      {},
      { code: '' },
      { code: 'print(1)', language: 'ruby' },
      { code: 'print(1)', timeout: 0 },
      { code: 'print(1)', timeout: 61 },
      { code: 'print(1)', timeout: 1.5 },
      { code: 42 },
    ]) {
      const response = await h.call(parameters);
      expect(response.status, JSON.stringify(parameters)).toBe(400);
      expect(typeof ((await response.json()) as { error: unknown }).error).toBe('string');
    }
  });

  it('a full queue is a 429 capacity_exceeded; JavaScript has a capacity of its own', async () => {
    const busy = h.run('import time\ntime.sleep(1.5)', { timeout: 5 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const response = await h.call({ code: 'print(1)', language: 'python' });
    expect(response.status).toBe(429);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('capacity_exceeded');
    // Issue 13, finding 6: JavaScript and Python shared one queue, so a busy Python slot refused JavaScript.
    expect((await h.call({ code: 'console.log(1)', language: 'javascript' })).status).toBe(200);
    expect((await busy).exit_code).toBe(0);
    expect((await h.call({ code: 'print(1)', language: 'python' })).status).toBe(200);
  });

  it('needs the tools scope', async () => {
    const { key } = await h.t.createKey({ name: 'reader', scopes: ['read'] });
    const response = await h.t.request('/api/v1/agent/tool-calling', {
      method: 'POST',
      key,
      json: { tool_name: 'code_execution', parameters: { code: 'print(1)' } },
    });
    expect(response.status).toBe(403);
  });

  it('/readyz reports the Python sandbox', async () => {
    const body = (await (await h.t.request('/readyz', { key: null })).json()) as {
      checks: Record<string, { ok: boolean }>;
    };
    expect(body.checks.code_execution_python?.ok).toBe(true);
  });
});

// Issue 13, finding 6: one key sending many long calls filled every running and queued slot, and
// another key's one-line call got 429 (or waited a minute).
describe('fairness between keys', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ uidBase: 64_000, concurrency: 2, queueSize: 16, perKeyRunning: 1, perKeyQueue: 4 });
  });
  afterAll(async () => h.t.close());

  it("one key's flood neither refuses nor starves another key's call", async () => {
    const { key: flooder } = await h.t.createKey({ name: 'flooder', scopes: ['tools'] });
    const flood = Array.from({ length: 18 }, () =>
      h.t
        .request('/api/v1/agent/tool-calling', {
          method: 'POST',
          key: flooder,
          json: { tool_name: 'code_execution', parameters: { language: 'python', code: 'import time\ntime.sleep(2)' } },
        })
        .then((response) => ({ status: response.status, at: performance.now() })),
    );
    await new Promise((resolve) => setTimeout(resolve, 400));
    const mine = await h.call({ code: 'print("mine")', language: 'python' });
    const mineDone = performance.now();
    expect(mine.status).toBe(200);
    expect(((await mine.json()) as { output: string }).output).toBe('mine\n');
    const answered = await Promise.all(flood);
    const statuses = answered.map((r) => r.status);
    // It ran in the slot the flooder may not take: done before the flooder's first two-second call
    // (which started 400 ms earlier), not after it. (Ordered, not timed: on a loaded machine each
    // Python start takes its time, for both.)
    expect(mineDone).toBeLessThan(Math.min(...answered.filter((r) => r.status === 200).map((r) => r.at)));
    // The flooder holds one slot and four waiting calls; the rest of its flood is refused.
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(13);
  }, 60_000);
});

describe('a host without the sandbox', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ python: '/usr/bin/no-such-python', uidBase: 63_100 });
  });
  afterAll(async () => h.t.close());

  it('disables Python, says so on /readyz and at start-up, and never runs it unsandboxed', async () => {
    const ready = await h.t.request('/readyz', { key: null });
    expect(ready.status).toBe(200); // not critical: the instance still serves
    const body = (await ready.json()) as { status: string; checks: Record<string, { ok: boolean; detail: string }> };
    expect(body.status).toBe('degraded');
    expect(body.checks.code_execution_python).toMatchObject({ ok: false });
    expect(body.checks.code_execution_python?.detail).toMatch(/^disabled: /);
    expect(h.t.logs.some((l) => String(l.msg).includes('Python disabled'))).toBe(true);

    const response = await h.call({ code: 'print(1)' });
    expect(response.status).toBe(503);
    expect(await response.json()).toEqual({
      error: 'Python execution is unavailable: this host cannot provide its sandbox',
    });
  });

  it('JavaScript still runs', async () => {
    expect(await h.run('console.log("js")', { language: 'javascript' })).toMatchObject({
      output: 'js\n',
      exit_code: 0,
    });
  });
});
