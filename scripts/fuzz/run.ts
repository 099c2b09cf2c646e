/**
 * `npm run fuzz`: schemathesis against a real ragport, from its own OpenAPI document.
 *
 * Starts the mock upstream (chat models for the gateway), creates an admin key with the keys CLI,
 * starts `node src/server.ts` as deployed (embedded database in a fresh directory, or
 * FUZZ_DATABASE_URL), then runs schemathesis on every operation that /api/v1/openapi.json lists
 * — routes added later are fuzzed without touching this script — with two checks: no 5xx
 * (`not_a_server_error`) and every response as documented (`response_schema_conformance`).
 * Fails unless schemathesis passes and at least FUZZ_MIN_REQUESTS requests were sent.
 *
 * Environment: FUZZ_REQUESTS (target number of generated requests, default 2400; max-examples
 * per operation is derived from it), FUZZ_MIN_REQUESTS (default 2000), FUZZ_SEED, FUZZ_WORKERS
 * (default 1: hypothesis 6 on Python 3.11 fails with "AST constructor recursion depth
 * mismatch" when several workers describe strategies at once), FUZZ_DATABASE_URL, FUZZ_REPORT_DIR (default a new directory under the system
 * temp dir), MODELS_DIR (default: built by .ci/fetch-model.sh).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startMockUpstream } from '../../test/support/mock-upstream.ts';

const root = path.resolve(import.meta.dirname, '../..');
const env = process.env;
const say = (line: string) => process.stdout.write(`fuzz: ${line}\n`);

const lastLine = (command: string, args: string[]) =>
  execFileSync(command, args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
    .trim()
    .split('\n')
    .at(-1) as string;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

async function waitForReady(url: string, server: ChildProcess): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (server.exitCode !== null) throw new Error(`ragport exited with code ${server.exitCode} before it was ready`);
    const ready = await fetch(`${url}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ready) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error('ragport was not ready within 120 s');
}

interface Har {
  log: { entries: { request: { method: string; url: string }; response: { status: number } }[] };
}

const st = lastLine('bash', ['scripts/fuzz/schemathesis.sh']);
const modelsDir = env.MODELS_DIR ?? lastLine('bash', ['.ci/fetch-model.sh']);
const reportDir = env.FUZZ_REPORT_DIR ?? mkdtempSync(path.join(tmpdir(), 'ragport-fuzz-'));
mkdirSync(reportDir, { recursive: true });
const dataDir = env.FUZZ_DATABASE_URL ? undefined : mkdtempSync(path.join(tmpdir(), 'ragport-fuzz-data-'));
const database = env.FUZZ_DATABASE_URL ? { DATABASE_URL: env.FUZZ_DATABASE_URL } : { DATA_DIR: dataDir as string };

const chatModel = 'mock-chat';
const mock = await startMockUpstream({ record: false, models: [chatModel] });
let server: ChildProcess | undefined;
let status = 1;
try {
  // A real admin key, made the way an operator makes one (before the server: the embedded
  // database admits one process at a time).
  const created = JSON.parse(
    execFileSync(
      'npm',
      ['run', '--silent', 'keys', '--', 'create', '--name', 'fuzz', '--scopes', 'admin', '--tier', 'enterprise'],
      {
        cwd: root,
        encoding: 'utf8',
        env: { ...env, ...database, LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    ),
  ) as { id: string; key: string };

  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const log = path.join(reportDir, 'ragport.log');
  server = spawn(process.execPath, ['src/server.ts'], {
    cwd: root,
    env: {
      ...env,
      ...database,
      HOST: '127.0.0.1',
      PORT: String(port),
      MODELS_DIR: modelsDir,
      OPENAI_API_KEY: 'fuzz-upstream-key',
      OPENAI_BASE_URL: mock.url,
      LOG_LEVEL: 'info',
      // Webhooks are fuzzed too; hooks.py points every endpoint it registers at loopback.
      WEBHOOK_SIGNING_KEY: randomBytes(32).toString('base64url'),
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      // schemathesis also sends requests without the key on purpose; past the per-address budget
      // for those (60 a minute by default) every request would be a 429 and nothing else tested.
      RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: '1000000',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logLines: Buffer[] = [];
  server.stdout?.on('data', (chunk: Buffer) => logLines.push(chunk));
  server.stderr?.on('data', (chunk: Buffer) => logLines.push(chunk));
  await waitForReady(url, server);

  const schema = (await (await fetch(`${url}/api/v1/openapi.json`)).json()) as {
    paths: Record<string, Record<string, unknown>>;
  };
  const operations = Object.values(schema.paths).reduce((n, methods) => n + Object.keys(methods).length, 0);
  const target = Number(env.FUZZ_REQUESTS ?? 2400);
  const maxExamples = Math.ceil(target / operations);
  const har = path.join(reportDir, 'requests.har');
  const args = [
    'run',
    `${url}/api/v1/openapi.json`,
    '--header',
    `Authorization: Bearer ${created.key}`,
    '--checks',
    'not_a_server_error,response_schema_conformance',
    '--max-examples',
    String(maxExamples),
    '--workers',
    env.FUZZ_WORKERS ?? '1',
    '--request-timeout',
    // code_execution may legitimately run for its 60 s limit.
    '90',
    '--suppress-health-check',
    'all',
    '--report',
    'har,junit',
    '--report-dir',
    reportDir,
    '--report-har-path',
    har,
    '--output-sanitize',
    'true',
    ...(env.FUZZ_SEED ? ['--seed', env.FUZZ_SEED] : []),
  ];
  say(`${operations} operations, max-examples ${maxExamples}; report in ${reportDir}`);
  say(`${st} ${args.join(' ').replace(created.key, '<admin key>')}`);
  const started = Date.now();
  // Hypothesis keeps its example database in the working directory: the report directory, not the repository.
  const schemathesis = spawn(st, args, {
    cwd: reportDir,
    stdio: 'inherit',
    env: {
      ...env,
      SCHEMATHESIS_HOOKS: path.join(root, 'scripts/fuzz/hooks.py'),
      RAGPORT_FUZZ_KEY_ID: created.id,
      RAGPORT_FUZZ_CHAT_MODEL: chatModel,
    },
  });
  const exitCode = await new Promise<number>((resolve) => schemathesis.on('exit', (code) => resolve(code ?? 1)));

  const entries = (JSON.parse(readFileSync(har, 'utf8')) as Har).log.entries;
  const serverErrors = entries.filter((e) => e.response.status >= 500);
  const statuses = new Map<number, number>();
  for (const e of entries) statuses.set(e.response.status, (statuses.get(e.response.status) ?? 0) + 1);
  writeFileSync(path.join(reportDir, 'ragport.log'), Buffer.concat(logLines));
  say(
    `${entries.length} requests in ${Math.round((Date.now() - started) / 1000)} s; by status: ${[...statuses]
      .sort(([a], [b]) => a - b)
      .map(([s, n]) => `${s}×${n}`)
      .join(' ')}`,
  );
  say(`5xx responses: ${serverErrors.length}; schemathesis exit code ${exitCode}; server log ${log}`);
  for (const e of serverErrors.slice(0, 10)) say(`  ${e.response.status} ${e.request.method} ${e.request.url}`);
  // hooks.py keeps the fuzzer off its own key; should that ever fail, everything after the
  // rotation or revocation would only test the 401. Say so rather than pass quietly.
  const stillValid = await fetch(`${url}/api/v1/keys/${created.id}`, {
    headers: { authorization: `Bearer ${created.key}` },
  }).then((r) => r.status === 200);
  if (!stillValid) say(`the fuzzer revoked or rotated its own key (${created.id}); see scripts/fuzz/hooks.py`);
  const minimum = Number(env.FUZZ_MIN_REQUESTS ?? 2000);
  if (entries.length < minimum) say(`fewer than ${minimum} requests: raise FUZZ_REQUESTS`);
  status = exitCode === 0 && serverErrors.length === 0 && entries.length >= minimum && stillValid ? 0 : 1;
} finally {
  server?.kill('SIGTERM');
  if (server && server.exitCode === null) await new Promise((resolve) => server?.once('exit', resolve));
  await mock.close();
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
}
say(status === 0 ? 'passed' : 'FAILED');
process.exit(status);
