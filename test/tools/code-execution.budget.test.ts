import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase62 } from '../../src/db/ids.ts';
import { call } from '../support/http.ts';
import { freePort, spawnRagport, waitUntil, type RagportProcess } from '../support/processes.ts';
import { py, startHarness, type Harness } from './code-execution.support.ts';

// Issue 13, findings 3, 4, 5 and 8: what one Python run may hold together, and what it may reach.

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ uidBase: 65_000, concurrency: 1, memoryMb: 256 });
});
afterAll(async () => h.t.close());

const python = (code: string, timeout = 10) => h.run(code, { language: 'python', timeout });

/** Zombie processes on the host right now (state Z), with their command names. */
function zombies(): string[] {
  const found: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (state === 'Z') found.push(stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

describe('Python: per-run budget', () => {
  it('memory is bounded per run: four processes of 100 MB cannot all live under a 256 MB budget', async () => {
    const r = await python(
      py(
        'import os, time',
        'kids = []',
        'for i in range(4):',
        '    pid = os.fork()',
        '    if pid == 0:',
        '        b = bytearray(100 * 1024 * 1024)',
        '        for j in range(0, len(b), 4096): b[j] = 1',
        '        time.sleep(1.5)',
        '        os._exit(0)',
        '    kids.append(pid)',
        'ok = 0',
        'for p in kids:',
        '    _, st = os.waitpid(p, 0)',
        '    ok += os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0',
        'print("survived", ok, flush=True)',
      ),
    );
    expect(r.output).not.toContain('survived 4');
  });

  // A probe of the tool: ThreadPoolExecutor(8) failed with "can't start new thread" after 6
  // threads. Each thread reserved a 64 MB malloc arena and an 8 MB stack of address space, so six
  // of them filled the 256 MB RLIMIT_AS while holding almost no memory.
  it('threads: 60 sleeping threads and 32 pool workers start, and 100 MB still fits beside them', async () => {
    const r = await python(
      py(
        'import threading',
        'from concurrent.futures import ThreadPoolExecutor',
        'stop = threading.Event()',
        'sleepers = [threading.Thread(target=stop.wait) for _ in range(60)]',
        'for t in sleepers: t.start()',
        'held = bytearray(100 * 1024**2)',
        'print("sleeping", threading.active_count() - 1, flush=True)',
        'stop.set()',
        'for t in sleepers: t.join()',
        'del held',
        // The barrier makes the pool start all 32 workers: each task waits for the other 31.
        'barrier = threading.Barrier(32)',
        'with ThreadPoolExecutor(32) as pool:',
        '    done = list(pool.map(lambda _: barrier.wait(), range(32)))',
        'print("pool", len(set(done)))',
      ),
    );
    expect(r).toMatchObject({ output: 'sleeping 60\npool 32\n', exit_code: 0 });
  });

  it('memory is bounded for threads too: 30 threads holding 20 MB each do not all fit in 256 MB', async () => {
    const r = await python(
      py(
        'import threading',
        'held, failed, lock = [], [], threading.Lock()',
        'def grab():',
        '    try:',
        '        b = bytearray(20 * 1024**2)',
        '        with lock: held.append(b)',
        '    except MemoryError:',
        '        with lock: failed.append(1)',
        'threads = [threading.Thread(target=grab) for _ in range(30)]',
        'for t in threads: t.start()',
        'for t in threads: t.join()',
        'print("held", len(held), "failed", len(failed))',
      ),
    );
    // Threads share their process's address space: what one may hold, all of them together may.
    const [, held, failed] = /^held (\d+) failed (\d+)\n$/.exec(r.output) ?? [];
    expect(Number(held) + Number(failed), r.output).toBe(30);
    expect(Number(held) * 20).toBeLessThan(256);
  });

  it('sandboxed processes are the first the kernel kills: oom_score_adj 1000', async () => {
    const r = await python('print(open("/proc/self/oom_score_adj").read().strip())');
    expect(r.output).toBe('1000\n');
  });

  it('inodes of /tmp and /dev/shm are capped: ENOSPC long before 20,000 empty files', async () => {
    for (const dir of ['/tmp', '/dev/shm']) {
      const r = await python(
        py(
          'import errno',
          'n = 0',
          'try:',
          '    for i in range(20000):',
          `        open(f"${dir}/f{i}", "w").close(); n += 1`,
          'except OSError as e:',
          '    print("stopped", n, errno.errorcode[e.errno])',
          'print("created", n)',
        ),
      );
      expect(r.output, dir).toMatch(/^stopped \d+ ENOSPC\n/);
      expect(Number(/stopped (\d+)/.exec(r.output)?.[1]), dir).toBeLessThan(5_000);
    }
  });

  it('a timed-out run leaves no zombie behind', async () => {
    const before = zombies().filter((z) => z === 'python3' || z === 'bwrap').length;
    const r = await python(py('import os, time', 'if os.fork() == 0:', '    time.sleep(60)', 'time.sleep(60)'), 1);
    expect(r.timed_out).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(zombies().filter((z) => z === 'python3' || z === 'bwrap').length).toBeLessThanOrEqual(before);
  });
});

describe('Python: inherited descriptors', () => {
  let server: RagportProcess | undefined;
  let dir: string;
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('descriptors the server inherited (fd 100 on a secret, fd 101 on a log) never reach the sandbox', async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'ragport-fds-'));
    writeFileSync(path.join(dir, 'secret'), 'the-host-secret');
    const secret = openSync(path.join(dir, 'secret'), 'r');
    const log = openSync(path.join(dir, 'log'), 'a');
    const port = await freePort();
    const admin = `admin_${randomBase62(40)}`;
    server = spawnRagport(
      'server',
      {
        PORT: String(port),
        DATA_DIR: path.join(dir, 'data'),
        RAGPORT_ADMIN_KEY: admin,
        CODE_EXECUTION_SANDBOX_UID_BASE: '65500',
      },
      { 100: secret, 101: log },
    );
    closeSync(secret);
    closeSync(log);
    const url = `http://127.0.0.1:${port}`;
    await waitUntil(
      'the Python sandbox of the server',
      async () => {
        const r = await fetch(`${url}/readyz`);
        const body = (await r.json()) as { checks?: { code_execution_python?: { ok: boolean } } };
        return body.checks?.code_execution_python?.ok === true;
      },
      { process: server, timeoutMs: 120_000 },
    );
    const r = await call(url, '/api/v1/agent/tool-calling', {
      method: 'POST',
      key: admin,
      json: {
        tool_name: 'code_execution',
        parameters: {
          code: py(
            'import os',
            'print(sorted(int(f) for f in os.listdir("/proc/self/fd")))',
            'for fd in (100, 101):',
            '    try:',
            '        os.write(fd, b"escaped") if fd == 101 else print(os.read(fd, 100))',
            '    except OSError as e:',
            '        print(fd, e.strerror)',
          ),
        },
      },
    });
    const result = (await r.json()) as { output: string };
    expect(result.output).not.toContain('the-host-secret');
    expect(result.output).toContain('100 Bad file descriptor');
    expect(result.output).toContain('101 Bad file descriptor');
    expect(readFileSync(path.join(dir, 'log'), 'utf8')).toBe('');
  }, 150_000);
});
