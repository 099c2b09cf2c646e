import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { LOCK_FILE } from '../../src/db/data-dir-lock.ts';
import { messageWithCauses } from '../../src/logging.ts';
import { openTestDatabase } from '../support/database.ts';
import { scratchDirs } from '../support/scratch.ts';
import { startTestApp } from '../support/app.ts';
import { call } from '../support/http.ts';
import { freePort, spawnRagport, waitUntil, type RagportProcess } from '../support/processes.ts';

const run = promisify(execFile);
interface PackageJson {
  scripts: Record<string, string>;
}
const root = path.resolve(import.meta.dirname, '../..');
const freshDir = scratchDirs('ragport-first-run-');

const logLines = (output: string) =>
  output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; [k: string]: unknown });

/** The machine's own Node, when it is older than ragport supports (Node 20 on the CI image). */
const oldNode = ['/usr/bin/node', '/usr/local/bin/node'].find((p) => existsSync(p) && p !== process.execPath);

describe('starting ragport the first time', { timeout: 180_000 }, () => {
  // `npm start`, `npm run worker`, `npm run keys -- list` and `npm test`, as package.json runs them.
  it.skipIf(oldNode === undefined).each([
    ['start', 'src/start.mjs'],
    ['worker', 'src/start-worker.mjs'],
    ['keys', 'src/keys.mjs', 'list'],
    ['test', 'node_modules/vitest/vitest.mjs', 'run', '--project', 'unit'],
  ])('an old Node is told so in one sentence (npm run %s)', async (script, entry, ...args) => {
    const { stdout: version } = await run(oldNode as string, ['--version']);
    const [major = 0, minor = 0] = version.slice(1).split('.').map(Number);
    if (major > 22 || (major === 22 && minor >= 18)) return;
    const scripts = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as PackageJson).scripts;
    if (script !== 'test') expect(scripts[script]).toMatch(new RegExp(` ${entry}$`));
    const failed = run(oldNode as string, [path.join(root, entry), ...args], { cwd: root });
    await expect(failed).rejects.toMatchObject({
      code: 1,
      stderr: `ragport needs Node.js 22.18 or newer (24 recommended), and this is Node.js ${version.trim().slice(1)}.\n`,
    });
  });

  it('`npm start`: a summary, one listening line, polls at debug; it stops when its pid is signalled', async () => {
    const port = await freePort();
    const dataDir = freshDir();
    const npm = spawn('npm', ['start'], {
      cwd: root,
      env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    npm.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    npm.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitUntil('npm start ready', async () => (await fetch(`${url}/readyz`)).status === 200, {
        timeoutMs: 120_000,
      });
      await fetch(`${url}/healthz`);
      await waitUntil('the listening line', async () => output.includes('ragport listening'));
      const messages = logLines(output).map((l) => l.msg);
      expect(messages).toContain(
        `database: embedded PGlite in ${path.join(dataDir, 'pg')} (this process owns DATA_DIR)`,
      );
      expect(messages.find((m) => m.startsWith('database schema: '))).toMatch(
        /^database schema: created \(\d+ migrations, the last \d{4}_\w+\)$/,
      );
      expect(messages.find((m) => m.startsWith('admin key: '))).toMatch(/^admin key: not set; set RAGPORT_ADMIN_KEY/);
      expect(messages.find((m) => m.startsWith('embedding model: '))).toBe(
        `embedding model: sentence-transformers/all-MiniLM-L6-v2 from MODELS_DIR ${path.resolve(process.env.MODELS_DIR ?? '')}: loaded`,
      );
      expect(messages.find((m) => m.startsWith('chat providers: '))).toMatch(
        /^chat providers: none configured; set OPENAI_API_KEY/,
      );
      expect(messages.find((m) => m.startsWith('tools: '))).toMatch(
        /^tools: rag_search on; web_search off \(no search provider is configured; set BRAVE_SEARCH_API_KEY, TAVILY_API_KEY or SEARXNG_URL to enable it\); code_execution on/,
      );
      expect(messages).toContain('memory: young generation bounded (--max-semi-space-size=16)');
      expect(messages.find((m) => m.startsWith('allocator: '))).toMatch(
        new RegExp(
          `^allocator: glibc \\d+\\.\\d+, arenas bounded \\(MALLOC_ARENA_MAX=${process.env.MALLOC_ARENA_MAX ?? '2'}\\)$`,
        ),
      );
      // One line says where it listens (not one per local address); health polls are not logged at info.
      expect(output.match(/listening/gi)).toHaveLength(1);
      expect(messages).toContain(`ragport listening on http://127.0.0.1:${port}`);
      expect(logLines(output).filter((l) => l.msg === 'request')).toEqual([]);
      // The server (named in the data directory's lock) runs with the young generation bounded.
      const { pid } = JSON.parse(readFileSync(path.join(dataDir, LOCK_FILE), 'utf8')) as { pid: number };
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      expect(argv.slice(1, 3)).toEqual(['--max-semi-space-size=16', 'src/start.mjs']);
      // …and with glibc's malloc arenas bounded (unless the environment chose a value).
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      expect(environ).toContain(`MALLOC_ARENA_MAX=${process.env.MALLOC_ARENA_MAX ?? '2'}`);

      // Stopping npm by its pid stops the server too: the port and the data directory are free.
      npm.kill('SIGTERM');
      await exited;
      await waitUntil(
        'the server gone',
        async () =>
          !(await fetch(`${url}/healthz`).then(
            () => true,
            () => false,
          )),
        {
          timeoutMs: 20_000,
        },
      );
      await waitUntil('the lock released', async () => !existsSync(path.join(dataDir, LOCK_FILE)), {
        timeoutMs: 20_000,
      });
      // The lock goes with the database, just before the last line is written: wait for that line.
      await waitUntil('the server says so', async () => output.includes('"msg":"stopped"'), {
        timeoutMs: 20_000,
      });
    } finally {
      npm.kill('SIGKILL');
    }
  });

  it.skipIf(!process.env.TEST_DATABASE_URL)('`npm run worker` stops when its pid is signalled', async () => {
    const db = await openTestDatabase();
    const metricsPort = await freePort();
    const npm = spawn('npm', ['run', 'worker'], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: db.url, METRICS_PORT: String(metricsPort), LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    npm.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    npm.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
    const health = `http://127.0.0.1:${metricsPort}/healthz`;
    const answers = () =>
      fetch(health).then(
        (r) => r.ok,
        () => false,
      );
    try {
      await waitUntil('npm run worker up', answers, { timeoutMs: 120_000 });
      npm.kill('SIGTERM');
      await exited;
      await waitUntil('the worker gone', async () => !(await answers()), { timeoutMs: 20_000 });
      await waitUntil('the worker says so', async () => output.includes('"msg":"worker stopped"'), {
        timeoutMs: 20_000,
      });
    } finally {
      npm.kill('SIGKILL');
      await db.close();
    }
  });

  it('a missing model: not ready, says how to provide it (log, /readyz, 503), and is picked up once it appears', async () => {
    const modelsDir = freshDir();
    const adminKey = `admin_${'x'.repeat(40)}`;
    const port = await freePort();
    const server: RagportProcess = spawnRagport('server', {
      PORT: String(port),
      DATA_DIR: freshDir(),
      MODELS_DIR: modelsDir,
      RAGPORT_ADMIN_KEY: adminKey,
    });
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitUntil('server up', async () => (await fetch(`${url}/healthz`)).ok, { process: server });
      const guidance = [
        `MODELS_DIR (${modelsDir}) does not hold it`,
        'set MODELS_DIR to a directory holding sentence-transformers/all-MiniLM-L6-v2/',
        '`bash .ci/fetch-model.sh` builds one and prints that directory',
        'Loading is retried until it succeeds.',
      ];
      const ready = await fetch(`${url}/readyz`);
      expect(ready.status).toBe(503);
      const body = (await ready.json()) as {
        status: string;
        checks: { embedding_models: { ok: boolean; detail: string } };
      };
      expect(body.status).toBe('unavailable');
      for (const text of guidance) expect(body.checks.embedding_models.detail).toContain(text);
      const logged = logLines(server.output()).find((l) => l.msg.includes('not loaded'));
      for (const text of guidance) expect(logged?.msg).toContain(text);

      const create = () =>
        call(url, '/api/v1/rag/collections', { method: 'POST', key: adminKey, json: { name: 'notes' } });
      const refused = await create();
      expect(refused.status).toBe(503);
      const message = ((await refused.json()) as { error: string }).error;
      for (const text of guidance) expect(message).toContain(text);

      // The model appears (copied, or fetched by .ci/fetch-model.sh): the retry loads it.
      mkdirSync(path.join(modelsDir, 'sentence-transformers'));
      symlinkSync(
        path.join(process.env.MODELS_DIR as string, 'sentence-transformers/all-MiniLM-L6-v2'),
        path.join(modelsDir, 'sentence-transformers/all-MiniLM-L6-v2'),
      );
      await waitUntil('ready with the model', async () => (await fetch(`${url}/readyz`)).status === 200, {
        process: server,
        timeoutMs: 60_000,
      });
      expect((await create()).status).toBe(201);
    } finally {
      await server.stop('SIGTERM');
    }
  });
});

describe('what is missing, and why something failed, said once', () => {
  it('chat with no provider configured says so', async () => {
    const t = await startTestApp();
    try {
      const client = new OpenAI({ apiKey: t.adminKey, baseURL: `${t.url}/api/v1`, maxRetries: 0 });
      const failed = client.chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'hi' }],
      });
      await expect(failed).rejects.toMatchObject({
        status: 404,
        message: expect.stringContaining(
          "The model 'gpt-4o-mini' does not exist: no chat provider is configured (set OPENAI_API_KEY, or list providers in the RAGPORT_CONFIG file)",
        ),
      });
    } finally {
      await t.close();
    }
  });

  it('an unreachable provider is logged with its cause once', async () => {
    const closedPort = await freePort();
    const t = await startTestApp({
      gateway: { providers: [{ name: 'openai', base_url: `http://127.0.0.1:${closedPort}/v1`, models: ['m'] }] },
    });
    try {
      const response = await t.request('/api/v1/chat/completions', {
        method: 'POST',
        json: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
      });
      expect(response.status).toBe(502);
      const line = t.logs.find((l) => l.msg === 'request failed') as { err: { message: string } } | undefined;
      expect(line?.err.message).toMatch(/^Provider openai is unreachable: connect ECONNREFUSED 127\.0\.0\.1:\d+$/);
    } finally {
      await t.close();
    }
  });

  it('messageWithCauses drops causes that repeat what was said', () => {
    const root = new Error('getaddrinfo ENOTFOUND hub.example');
    const fetchFailed = new TypeError('fetch failed', { cause: root });
    expect(messageWithCauses(new Error('fetch failed', { cause: fetchFailed }))).toBe(
      'fetch failed: getaddrinfo ENOTFOUND hub.example',
    );
    expect(messageWithCauses(new Error('loading failed', { cause: fetchFailed }))).toBe(
      'loading failed: fetch failed: getaddrinfo ENOTFOUND hub.example',
    );
    // A wrapper that adds context before its cause's words, over a cause that adds detail after them.
    const unreachable = new Error('Provider mock is unreachable: connect ECONNREFUSED 127.0.0.1:9100');
    const client = new Error('Provider mock is unreachable', { cause: unreachable });
    expect(messageWithCauses(new Error("Embedding model 'm': Provider mock is unreachable", { cause: client }))).toBe(
      "Embedding model 'm': Provider mock is unreachable: connect ECONNREFUSED 127.0.0.1:9100",
    );
    expect(messageWithCauses(new Error('a: b', { cause: new Error('c: d') }))).toBe('a: b: c: d');
  });
});
