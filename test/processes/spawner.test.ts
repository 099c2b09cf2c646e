import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logging.ts';
import { createSpawner, type SpawnedChild, type Spawner } from '../../src/processes/spawner.ts';
import { alive, childPids, descendantPids } from '../support/processes.ts';
import { until } from '../support/poll.ts';

const echo = fileURLToPath(new URL('../support/echo-process.ts', import.meta.url));
const javascriptProcess = fileURLToPath(
  new URL('../../src/tools/code-execution/javascript-process.ts', import.meta.url),
);
const spawnerPid = () => childPids(process.pid, 'spawner-process.mjs')[0];
const nextMessage = async (child: SpawnedChild) => (await once(child, 'message'))[0] as Record<string, unknown>;
const exitOf = async (child: SpawnedChild) => (await once(child, 'exit')) as [number | null, string | null, string?];

let spawner: Spawner | undefined;
const open = () => (spawner = createSpawner({ logger: createLogger('silent') }));
afterEach(async () => {
  await spawner?.close();
  spawner = undefined;
  expect(descendantPids(process.pid, 'echo-process.ts')).toEqual([]);
});

describe('process spawner', () => {
  it('forks children from its own process and relays their messages, stderr and exit', async () => {
    const children = open();
    const child = children.fork(echo, { execArgv: ['--max-old-space-size=64'], env: { ONLY: 'this' } });
    const ready = await nextMessage(child);
    // What the caller asked for, and nothing of this process's environment.
    expect(ready).toEqual({ ready: true, argv: ['--max-old-space-size=64'], env: ['ONLY'] });
    expect(child.pid).toBeGreaterThan(0);
    expect(childPids()).not.toContain(child.pid);
    expect(childPids(spawnerPid())).toContain(child.pid);

    child.send({ bytes: new Uint8Array([1, 2, 3]), n: 7 });
    expect(await nextMessage(child)).toEqual({ echo: { bytes: new Uint8Array([1, 2, 3]), n: 7 } });

    const stderr: string[] = [];
    child.on('stderr', (text) => stderr.push(text));
    const exit = exitOf(child);
    child.send({ stderr: 'last words\n' });
    child.send({ exit: 3 });
    // The exit comes after the child's stderr, read to its end.
    expect(await exit).toEqual([3, null, undefined]);
    expect(stderr.join('')).toBe('last words\n');
    expect(child.alive).toBe(false);
  });

  it('kills a child on request, even one stuck in a loop', async () => {
    const children = open();
    const child = children.fork(echo, { execArgv: [], env: {} });
    await nextMessage(child);
    const pid = child.pid as number;
    child.send({ hang: true });
    const exit = exitOf(child);
    child.kill('SIGKILL');
    expect(await exit).toEqual([null, 'SIGKILL', undefined]);
    expect(alive(pid)).toBe(false);
  });

  it('reports a child that cannot start', async () => {
    const children = open();
    const child = children.fork('/nonexistent/child.ts', { execArgv: [], env: {} });
    const [code, signal] = await exitOf(child);
    expect(code).not.toBe(0);
    expect(signal).toBeNull();
  });

  it('spawns a program with files and inputs at their descriptors, relaying its output and exit', async () => {
    const children = open();
    const output: Buffer[] = [];
    const child = children.spawn({
      command: '/bin/sh',
      args: ['-c', 'cat; cat <&3; cat <&4 >&2; echo "$ONLY"; exit 5'],
      env: { ONLY: 'this' },
      cwd: '/',
      detached: false,
      stdio: 5,
      outputLimit: 1 << 20,
      files: { 3: echo },
      inputs: { 0: 'from stdin\n', 4: 'from fd 4\n' },
    });
    child.on('output', (data) => output.push(Buffer.from(data)));
    expect(await exitOf(child)).toEqual([5, null, undefined]);
    // stdout and stderr are two pipes, each relayed in its own order: fd 4 went to stderr.
    const text = Buffer.concat(output).toString();
    expect(text).toContain('from fd 4\n');
    expect(text.replace('from fd 4\n', '')).toBe(`from stdin\n${readFileSync(echo, 'utf8')}this\n`);
  });

  it("kills a detached program's whole process group", async () => {
    const children = open();
    const child = children.spawn({
      command: '/bin/sh',
      args: ['-c', 'sleep 300 & sleep 300 & echo started; wait'],
      env: {},
      cwd: '/',
      detached: true,
      stdio: 3,
      outputLimit: 1 << 20,
      files: {},
      inputs: {},
    });
    await once(child, 'output');
    // The arguments are NUL-separated: this matches the sleepers, not the shell's command line.
    const sleeping = () => descendantPids(spawnerPid(), 'sleep\u0000300');
    await until('both sleepers', () => sleeping().length === 2);
    const sleepers = sleeping();
    const exit = exitOf(child);
    child.kill('SIGKILL', { group: true });
    expect(await exit).toEqual([null, 'SIGKILL', undefined]);
    for (const pid of sleepers) await until(`sleep ${pid} to exit`, () => !alive(pid));
  });

  it('relays output up to one byte past its limit, however much the program writes', async () => {
    const children = open();
    const child = children.spawn({
      command: '/usr/bin/yes',
      args: [],
      env: {},
      cwd: '/',
      detached: false,
      stdio: 3,
      outputLimit: 1000,
      files: {},
      inputs: {},
    });
    let relayed = 0;
    child.on('output', (data) => (relayed += data.length));
    await until('the limit crossed', () => relayed > 1000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(relayed).toBe(1001);
    expect(child.alive).toBe(true); // still writing: stopping it is the caller's decision
    const exit = exitOf(child);
    child.kill('SIGKILL');
    expect(await exit).toEqual([null, 'SIGKILL', undefined]);
  });

  it('reports a program that does not exist', async () => {
    const children = open();
    const [code, signal, error] = await exitOf(
      children.spawn({
        command: '/nonexistent',
        args: [],
        env: {},
        cwd: '/',
        detached: false,
        stdio: 3,
        outputLimit: 1 << 20,
        files: {},
        inputs: {},
      }),
    );
    expect([code, signal]).toEqual([null, null]);
    expect(error).toMatch(/ENOENT/);
  });

  it('a spawner killed from outside takes its children along; the next fork starts another', async () => {
    const children = open();
    const child = children.fork(echo, { execArgv: [], env: {} });
    await nextMessage(child);
    const first = spawnerPid() as number;
    const orphan = child.pid as number;
    const exit = exitOf(child);
    process.kill(first, 'SIGKILL');
    expect(await exit).toEqual([null, 'SIGKILL', 'the process spawner stopped']);
    await until('the orphaned child to exit', () => !alive(orphan));

    const next = children.fork(echo, { execArgv: [], env: {} });
    expect(await nextMessage(next)).toMatchObject({ ready: true });
    expect(spawnerPid()).not.toBe(first);
  });

  it('its children write no core files, and a signal to the process group does not end it', async () => {
    const children = open();
    const child = children.fork(echo, { execArgv: [], env: {} });
    await nextMessage(child);
    // A JavaScript run V8 aborts wrote a 1.45 GB core each time where the system allows them.
    const core = readFileSync(`/proc/${child.pid as number}/limits`, 'utf8')
      .split('\n')
      .find((line) => line.startsWith('Max core file size'));
    expect(core).toMatch(/^Max core file size\s+0\s+0\s/);
    // Ctrl-C in a terminal, systemd stopping the unit: the server drains, then closes the spawner.
    const pid = spawnerPid() as number;
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.kill(pid, signal);
    await new Promise((r) => setTimeout(r, 300));
    expect(alive(pid)).toBe(true);
    expect(child.alive).toBe(true);
    const next = children.fork(echo, { execArgv: [], env: {} });
    expect(await nextMessage(next)).toMatchObject({ ready: true });
    expect(spawnerPid()).toBe(pid);
  });

  it("a child whose main thread is held for good (a JavaScript run's looping getter) ends with its spawner", async () => {
    const children = open();
    const run = children.fork(javascriptProcess, { execArgv: [], env: {} });
    expect(await nextMessage(run)).toEqual({ type: 'ready' });
    const pid = run.pid as number;
    // Its getter is read outside the isolate's timer: the main thread is held for good.
    run.send({
      code: 'throw { get message() { while (true) {} }, get stack() { while (true) {} } }',
      timeoutMs: 500,
      limits: { memoryMb: 64, outputLimitBytes: 1024 },
    });
    await new Promise((r) => setTimeout(r, 300));
    process.kill(spawnerPid() as number, 'SIGKILL');
    await until('the run process to end with its spawner', () => !alive(pid), { timeoutMs: 10_000 });
  });

  it('closing kills every child and the spawner', async () => {
    const children = open();
    const forked = [1, 2].map(() => children.fork(echo, { execArgv: [], env: {} }));
    await Promise.all(forked.map(nextMessage));
    const pids = [spawnerPid() as number, ...forked.map((c) => c.pid as number)];
    const exits = forked.map(exitOf);
    await children.close();
    await Promise.all(exits);
    for (const pid of pids) await until(`process ${pid} to exit`, () => !alive(pid));
  });
});
