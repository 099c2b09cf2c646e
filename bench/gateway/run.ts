import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, homedir, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { runLoad, type LoadResult } from './load.ts';

/**
 * Gateway benchmark: the mock upstream called directly, through ragport, through Portkey's
 * gateway and through LiteLLM's proxy, in one run on this machine. Not a test: it prints one
 * table and keeps the raw numbers in bench/results/.
 *
 *   bash bench/setup-peers.sh            (once: Portkey and LiteLLM into the cache folder)
 *   node bench/gateway/run.ts
 *
 * The peers are looked for where bench/setup-peers.sh puts them (RAGPORT_BENCH_PEERS, else
 * $RAGPORT_CI_CACHE/bench-peers, else ~/.cache/ragport-ci/bench-peers); PORTKEY_START (Portkey's
 * build/start-server.js) and LITELLM_BIN (the litellm executable) point at other copies.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const peersDir =
  process.env.RAGPORT_BENCH_PEERS ??
  path.join(process.env.RAGPORT_CI_CACHE ?? path.join(homedir(), '.cache/ragport-ci'), 'bench-peers');
const portkeyStart =
  process.env.PORTKEY_START ?? path.join(peersDir, 'portkey/node_modules/@portkey-ai/gateway/build/start-server.js');
const litellmBin = process.env.LITELLM_BIN ?? path.join(peersDir, 'litellm/bin/litellm');
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 5_000);
const WARMUP_MS = 1_000;
const CONCURRENCIES = (process.env.BENCH_CONCURRENCY ?? '1,16,64,256').split(',').map(Number);
const CLOCK_TICK = 100;
/** Which parts to run: load (50 ms), stream, zero (0 ms), held. */
const PHASES = new Set((process.env.BENCH_PHASES ?? 'load,stream,zero,held').split(','));
/** Token rate of the 1,000 held-open streams. */
const HELD_TPS = Number(process.env.BENCH_HELD_TPS ?? 50);
/**
 * The Node options ragport runs with: those `npm start` passes (package.json), so that the bench
 * measures what users run; BENCH_NODE_OPTIONS replaces them ("" for Node's and V8's defaults).
 */
const NODE_OPTIONS = (process.env.BENCH_NODE_OPTIONS ?? startScriptOptions()).split(' ').filter(Boolean);

function startScriptOptions(): string {
  const { scripts } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    scripts: { start: string };
  };
  return (/^(?:[A-Z_]+=\S+ )*node ((?:--\S+ )*)/.exec(scripts.start)?.[1] ?? '').trim();
}

interface Target {
  name: string;
  origin: string;
  path: string;
  headers: Record<string, string>;
  pid: number | undefined;
  /** ragport's process, which answers 'memory' with its process.memoryUsage(). */
  child?: ChildProcess;
}

const children: ChildProcess[] = [];
/** Temporary directories to remove at the end. */
const scratch: string[] = [];
const notes: string[] = [];

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });

function forkTs<T>(
  file: string,
  env: Record<string, string> = {},
  execArgv: string[] = [],
): Promise<{ child: ChildProcess; ready: T }> {
  const child = fork(path.join(here, file), [], {
    execArgv,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.once('message', (ready) => resolve({ child, ready: ready as T }));
    child.once('exit', (code) => reject(new Error(`${file} exited with ${code}`)));
  });
}

function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICK;
}

function rssMb(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) / 1024 : NaN;
}

const chatBody = (stream: boolean) =>
  JSON.stringify({
    model: 'mock-chat',
    messages: [{ role: 'user', content: 'Say hello in five words' }],
    max_tokens: 16,
    stream,
  });

/** One chat request to the target: its status and body. */
async function post(target: Target, stream: boolean): Promise<{ status: number; text: string }> {
  const response = await fetch(target.origin + target.path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...target.headers },
    body: chatBody(stream),
  });
  return { status: response.status, text: await response.text() };
}

async function waitReady(target: Target, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const { status, text } = await post(target, false);
      if (status === 200) return true;
      if (Date.now() + 1_000 > deadline) notes.push(`${target.name}: last answer ${status} ${text.slice(0, 200)}`);
    } catch {
      // not listening yet
    }
    await sleep(500);
  }
  return false;
}

/** Whether a streamed request through the target ends with [DONE]. */
async function streams(target: Target): Promise<boolean> {
  try {
    const { status, text } = await post(target, true);
    if (status !== 200 || !text.includes('[DONE]')) {
      notes.push(`${target.name}: streamed request answered ${status} ${text.slice(0, 160)}`);
      return false;
    }
    return true;
  } catch (error) {
    notes.push(`${target.name}: streamed request failed: ${(error as Error).message}`);
    return false;
  }
}

async function startPortkey(mockUrl: string): Promise<Target | undefined> {
  if (!existsSync(portkeyStart)) {
    notes.push(`Portkey: ${portkeyStart} not found (bash bench/setup-peers.sh, or set PORTKEY_START)`);
    return undefined;
  }
  const port = await freePort();
  const child = spawn(process.execPath, [portkeyStart, `--port=${port}`, '--headless'], {
    stdio: 'ignore',
    env: { ...process.env, NODE_ENV: 'production' },
  });
  children.push(child);
  const target: Target = {
    name: 'portkey',
    origin: `http://127.0.0.1:${port}`,
    path: '/v1/chat/completions',
    headers: { authorization: 'Bearer sk-mock', 'x-portkey-provider': 'openai', 'x-portkey-custom-host': mockUrl },
    pid: child.pid,
  };
  return (await waitReady(target, 30_000)) ? target : (notes.push('Portkey: did not answer 200'), undefined);
}

async function startLitellm(mockUrl: string): Promise<Target | undefined> {
  if (!existsSync(litellmBin)) {
    notes.push(`LiteLLM: ${litellmBin} not found (bash bench/setup-peers.sh, or set LITELLM_BIN)`);
    return undefined;
  }
  const port = await freePort();
  const dir = path.join(tmpdir(), `ragport-bench-litellm-${port}`);
  mkdirSync(dir, { recursive: true });
  scratch.push(dir);
  const config = path.join(dir, 'config.yaml');
  writeFileSync(
    config,
    [
      'model_list:',
      '  - model_name: mock-chat',
      '    litellm_params:',
      '      model: openai/mock-chat',
      `      api_base: ${mockUrl}`,
      '      api_key: sk-mock',
      'general_settings:',
      '  master_key: sk-bench-master',
      'litellm_settings:',
      '  telemetry: false',
      '',
    ].join('\n'),
  );
  const child = spawn(
    litellmBin,
    ['--config', config, '--port', String(port), '--host', '127.0.0.1', '--num_workers', '1'],
    {
      stdio: 'ignore',
      env: { ...process.env, LITELLM_LOCAL_MODEL_COST_MAP: 'True', LITELLM_LOG: 'ERROR' },
    },
  );
  children.push(child);
  const target: Target = {
    name: 'litellm',
    origin: `http://127.0.0.1:${port}`,
    path: '/v1/chat/completions',
    headers: { authorization: 'Bearer sk-bench-master' },
    pid: child.pid,
  };
  return (await waitReady(target, 180_000)) ? target : (notes.push('LiteLLM: did not answer 200'), undefined);
}

interface Row {
  phase: string;
  concurrency: number;
  target: string;
  result: LoadResult;
  cpuUsPerRequest: number;
}

async function measure(phase: string, target: Target, concurrency: number, stream: boolean): Promise<Row> {
  const options = {
    origin: target.origin,
    path: target.path,
    headers: target.headers,
    body: chatBody(stream),
    concurrency,
  };
  await runLoad({ ...options, durationMs: WARMUP_MS });
  const cpuBefore = cpuSeconds(target.pid);
  const result = await runLoad({ ...options, durationMs: DURATION_MS });
  const cpu = cpuSeconds(target.pid) - cpuBefore;
  const row = { phase, concurrency, target: target.name, result, cpuUsPerRequest: (cpu / result.requests) * 1e6 };
  process.stderr.write(
    `${phase} c=${concurrency} ${target.name}: ${result.rps.toFixed(0)}/s p50 ${result.p50.toFixed(2)} p99 ${result.p99.toFixed(2)} errors ${result.errors}\n`,
  );
  return row;
}

const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : '-');

function table(rows: Row[]): string {
  const lines = [
    '| phase | conc | target | req/s | vs direct | p50 ms | p99 ms | +p50 ms | +p99 ms | TTFT p50 | TTFT p99 | CPU µs/req | errors |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const row of rows) {
    const direct = rows.find(
      (r) => r.phase === row.phase && r.concurrency === row.concurrency && r.target === 'direct',
    );
    const r = row.result;
    const d = direct?.result;
    lines.push(
      `| ${row.phase} | ${row.concurrency} | ${row.target} | ${fmt(r.rps, 0)} | ${d ? fmt(r.rps / d.rps, 2) : '-'} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} | ${d && row.target !== 'direct' ? fmt(r.p50 - d.p50, 2) : '-'} | ${d && row.target !== 'direct' ? fmt(r.p99 - d.p99, 2) : '-'} | ${fmt(r.ttft50, 2)} | ${fmt(r.ttft99, 2)} | ${fmt(row.cpuUsPerRequest, 0)} | ${r.errors} |`,
    );
  }
  return lines.join('\n');
}

async function heldStreams(
  target: Target,
  count: number,
): Promise<{ result: LoadResult; peakRssMb: number; idleRssMb: number; peakMemory?: NodeJS.MemoryUsage }> {
  const idleRssMb = rssMb(target.pid);
  let peakRssMb = idleRssMb;
  // What the main thread's heap held when RSS peaked (worker threads' heaps are in RSS only).
  let peakMemory: NodeJS.MemoryUsage | undefined;
  const onMemory = (m: unknown) => {
    peakMemory = (m as { memory?: NodeJS.MemoryUsage }).memory ?? peakMemory;
  };
  target.child?.on('message', onMemory);
  const sampler = setInterval(() => {
    const rss = rssMb(target.pid);
    if (rss <= peakRssMb) return;
    peakRssMb = rss;
    target.child?.send('memory');
  }, 50);
  const result = await runLoad({
    origin: target.origin,
    path: target.path,
    headers: target.headers,
    body: chatBody(true),
    concurrency: count,
    durationMs: 120_000,
    perWorker: 1,
  });
  clearInterval(sampler);
  await sleep(100);
  target.child?.off('message', onMemory);
  return { result, peakRssMb, idleRssMb, ...(peakMemory ? { peakMemory } : {}) };
}

async function main(): Promise<void> {
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  const started = new Date();
  const loadBefore = loadavg()[0] ?? NaN;
  process.stderr.write(
    `load average before: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} on ${cpus().length} cores\n`,
  );

  const { child: mockChild, ready: mock } = await forkTs<{ url: string; port: number }>('mock-server.ts');
  const setMock = (options: Record<string, number>) =>
    new Promise<void>((resolve) => {
      mockChild.once('message', () => resolve());
      mockChild.send(options);
    });
  const startRagport = async (
    name: string,
    databaseUrl: string | undefined,
    execArgv: string[] = NODE_OPTIONS,
  ): Promise<Target> => {
    const { child, ready } = await forkTs<{ port: number; key: string }>(
      'ragport-server.ts',
      // glibc's arenas as `npm start` sets them (package.json), unless the caller chose.
      {
        BENCH_UPSTREAM_URL: mock.url,
        BENCH_DATABASE_URL: databaseUrl ?? '',
        MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '2',
      },
      execArgv,
    );
    return {
      name,
      origin: `http://127.0.0.1:${ready.port}`,
      path: '/api/v1/chat/completions',
      headers: { authorization: `Bearer ${ready.key}` },
      pid: child.pid,
      child,
    };
  };
  const direct: Target = {
    name: 'direct',
    origin: `http://127.0.0.1:${mock.port}`,
    path: '/v1/chat/completions',
    headers: {},
    pid: mockChild.pid,
  };
  // With BENCH_DATABASE_URL, `ragport` keeps its keys and usage on that PostgreSQL server (the
  // deployment for load) and `ragport-pglite` on the embedded database; otherwise only the latter.
  const pgUrl = process.env.BENCH_DATABASE_URL || undefined;
  const ours = await startRagport(pgUrl ? 'ragport' : 'ragport-pglite', pgUrl);
  const pglite = pgUrl ? await startRagport('ragport-pglite', undefined) : undefined;
  const only = process.env.BENCH_TARGETS?.split(',');
  const wanted = (name: string) => only === undefined || only.includes(name);
  const portkey = wanted('portkey') ? await startPortkey(mock.url) : undefined;
  const litellm = wanted('litellm') ? await startLitellm(mock.url) : undefined;
  const targets = [direct, ours, pglite, portkey, litellm].filter(
    (t): t is Target => t !== undefined && wanted(t.name),
  );
  const streamTargets: Target[] = [];
  for (const t of targets) {
    if (await streams(t)) streamTargets.push(t);
    else notes.push(`${t.name}: a streamed request failed, left out of the streaming rows`);
  }

  const rows: Row[] = [];
  await setMock({ latencyMs: 50, tokensPerSecond: 0, completionTokens: 5 });
  if (PHASES.has('load'))
    for (const c of CONCURRENCIES) for (const t of targets) rows.push(await measure('50ms', t, c, false));
  await setMock({ latencyMs: 50, tokensPerSecond: 50, completionTokens: 10 });
  if (PHASES.has('stream'))
    for (const c of CONCURRENCIES)
      for (const t of streamTargets) rows.push(await measure('stream 50 tok/s', t, c, true));
  await setMock({ latencyMs: 0, tokensPerSecond: 0, completionTokens: 5 });
  if (PHASES.has('zero')) for (const t of targets) rows.push(await measure('0ms', t, 64, false));

  const afterLoad = [ours, pglite]
    .filter((t): t is Target => t !== undefined)
    .map((t) => `${t.name} ${fmt(rssMb(t.pid), 0)} MB`)
    .join(', ');
  for (const child of children.splice(1)) {
    if (child.connected) child.disconnect();
    else child.kill('SIGTERM');
  }

  /**
   * Held-open streams through fresh instances, so that RSS shows what the streams cost; a
   * variant with a smaller young generation shows how much of the rest is V8 heap headroom. Each
   * instance takes a second 1,000 once the first have finished: a running server's case, beside a
   * just-started one's.
   */
  async function held(lines: string[], raw: Record<string, unknown>): Promise<void> {
    const heldDirect = await heldStreams(direct, 1_000);
    raw.direct = heldDirect;
    // With the options `npm start` passes, and with Node's defaults to show what they change.
    const defaults: [string, string | undefined, string[]][] =
      NODE_OPTIONS.length > 0 ? [[`${pgUrl ? 'ragport' : 'ragport-pglite'}, V8 defaults`, pgUrl, []]] : [];
    const fresh: [string, string | undefined, string[]][] = pgUrl
      ? [['ragport', pgUrl, NODE_OPTIONS], ...defaults, ['ragport-pglite', undefined, NODE_OPTIONS]]
      : [['ragport-pglite', undefined, NODE_OPTIONS], ...defaults];
    for (const [name, url, execArgv] of fresh) {
      const t = await startRagport(name, url, execArgv);
      // BENCH_HELD_WARMUP=streams: 4 s of BENCH_HELD_WARMUP_C (64) streams first, so the code is
      // compiled and some upstream connections are open: how much of the first burst is warm-up.
      if (process.env.BENCH_HELD_WARMUP === 'streams')
        await runLoad({
          ...t,
          body: chatBody(true),
          concurrency: Number(process.env.BENCH_HELD_WARMUP_C ?? 64),
          durationMs: 4000,
        });
      else await runLoad({ ...t, body: chatBody(false), concurrency: 4, durationMs: 500 });
      const h = await heldStreams(t, 1_000);
      raw[t.name] = h;
      lines.push(
        `1,000 concurrent streams (50 ms, ${HELD_TPS} tok/s, 100 tokens each) through ${t.name}: RSS ${fmt(h.idleRssMb, 0)} MB before, ${fmt(h.peakRssMb, 0)} MB peak` +
          (h.peakMemory
            ? ` (main thread's V8 heap then ${fmt(h.peakMemory.heapUsed / 2 ** 20, 0)} MB used of ${fmt(h.peakMemory.heapTotal / 2 ** 20, 0)}, external ${fmt(h.peakMemory.external / 2 ** 20, 0)} MB); `
            : '; ') +
          `TTFT p50/p99 ${fmt(h.result.ttft50, 1)}/${fmt(h.result.ttft99, 1)} ms vs direct ${fmt(heldDirect.result.ttft50, 1)}/${fmt(heldDirect.result.ttft99, 1)} ms ` +
          `(overhead ${fmt(h.result.ttft50 - heldDirect.result.ttft50, 1)}/${fmt(h.result.ttft99 - heldDirect.result.ttft99, 1)} ms); ` +
          `completed ${h.result.requests}/1000, errors ${h.result.errors} (direct ${heldDirect.result.requests}/1000).`,
      );
      // The same 1,000 again through the same process: its code compiled by now and its 1,000
      // upstream connections open (the first burst paid for both; see docs/gateway.md).
      const again = await heldStreams(t, 1_000);
      const directAgain = await heldStreams(direct, 1_000);
      raw[`${t.name}, again`] = again;
      raw[`direct, again after ${t.name}`] = directAgain;
      lines.push(
        `  again through the same ${t.name} (warm): TTFT p50/p99 ${fmt(again.result.ttft50, 1)}/${fmt(again.result.ttft99, 1)} ms vs direct again ${fmt(directAgain.result.ttft50, 1)}/${fmt(directAgain.result.ttft99, 1)} ms ` +
          `(overhead ${fmt(again.result.ttft50 - directAgain.result.ttft50, 1)}/${fmt(again.result.ttft99 - directAgain.result.ttft99, 1)} ms); peak RSS ${fmt(again.peakRssMb, 0)} MB; ` +
          `completed ${again.result.requests}/1000, errors ${again.result.errors}.`,
      );
    }
  }

  await setMock({ latencyMs: 50, tokensPerSecond: HELD_TPS, completionTokens: 100 });
  const heldLines: string[] = [`RSS after the runs above: ${afterLoad}.`];
  const heldRaw: Record<string, unknown> = {};
  if (PHASES.has('held')) await held(heldLines, heldRaw);
  const output = [
    `Gateway benchmark ${started.toISOString()} commit ${commit}, ${cpus().length} cores, load average before ${loadBefore.toFixed(2)}`,
    `${DURATION_MS / 1000}s per cell after ${WARMUP_MS / 1000}s warm-up; closed-loop undici load generator in a third process.`,
    `ragport runs with Node options: ${NODE_OPTIONS.length > 0 ? NODE_OPTIONS.join(' ') : "none (Node's defaults)"}.`,
    '',
    table(rows),
    '',
    ...heldLines,
    ...(notes.length > 0 ? ['', ...notes.map((n) => `note: ${n}`)] : []),
  ].join('\n');
  process.stdout.write(`${output}\n`);

  const resultsDir = path.join(root, 'bench/results');
  mkdirSync(resultsDir, { recursive: true });
  const label = process.env.BENCH_LABEL ? `-${process.env.BENCH_LABEL}` : '';
  const stem = `gateway-${started.toISOString().slice(0, 10)}-${commit}${label}`;
  writeFileSync(path.join(resultsDir, `${stem}.md`), `${output}\n`);
  writeFileSync(
    path.join(resultsDir, `${stem}.json`),
    `${JSON.stringify({ started: started.toISOString(), commit, nodeOptions: NODE_OPTIONS, rows, held: heldRaw, notes }, null, 2)}\n`,
  );
}

try {
  await main();
} finally {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
  for (const child of children) {
    if (child.connected) child.disconnect();
    else child.kill('SIGTERM');
  }
}
