import { fork, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runLoad } from './load.ts';

/**
 * Where ragport's CPU goes on the gateway path: one ragport (embedded database, or
 * BENCH_DATABASE_URL) under `--cpu-prof`, loaded through the 0 ms mock upstream at c=64, then the
 * self time of the hottest functions. Not a test; a tool for bench/gateway/run.ts's CPU column.
 *
 *   node bench/gateway/profile.ts [profile-dir]      (BENCH_DURATION_MS, BENCH_CONCURRENCY,
 *                                                     BENCH_LATENCY_MS: the mock's latency)
 *
 * BENCH_STREAMS=1000 profiles that many held-open streams instead (50 ms, 50 tok/s, 100 tokens
 * each, as in run.ts), each sent once: where the time to first token goes.
 */
const here = path.dirname(fileURLToPath(import.meta.url));
const dir = path.resolve(process.argv[2] ?? 'cpu-profiles');
const durationMs = Number(process.env.BENCH_DURATION_MS ?? 5_000);
const streams = Number(process.env.BENCH_STREAMS ?? 0);
const concurrency = streams > 0 ? streams : Number(process.env.BENCH_CONCURRENCY ?? 64);

function start<T>(file: string, env: Record<string, string>, execArgv: string[] = []) {
  const child = fork(path.join(here, file), [], { execArgv, env: { ...process.env, ...env }, stdio: 'inherit' });
  return new Promise<{ child: ChildProcess; ready: T }>((resolve, reject) => {
    child.once('message', (ready) => resolve({ child, ready: ready as T }));
    child.once('exit', (code) => reject(new Error(`${file} exited with ${code}`)));
  });
}

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  endTime: number;
  startTime: number;
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const mock = await start<{ url: string; port: number }>('mock-server.ts', {});
await new Promise<void>((resolve) => {
  mock.child.once('message', () => resolve());
  mock.child.send(
    streams > 0
      ? { latencyMs: 50, tokensPerSecond: 50, completionTokens: 100 }
      : { latencyMs: Number(process.env.BENCH_LATENCY_MS ?? 0), tokensPerSecond: 0, completionTokens: 5 },
  );
});
const ragport = await start<{ port: number; key: string }>(
  'ragport-server.ts',
  { BENCH_UPSTREAM_URL: mock.ready.url, BENCH_DATABASE_URL: process.env.BENCH_DATABASE_URL ?? '' },
  ['--cpu-prof', `--cpu-prof-dir=${dir}`],
);
const result = await runLoad({
  origin: `http://127.0.0.1:${ragport.ready.port}`,
  path: '/api/v1/chat/completions',
  headers: { authorization: `Bearer ${ragport.ready.key}` },
  body: JSON.stringify({
    model: 'mock-chat',
    messages: [{ role: 'user', content: 'Say hello' }],
    max_tokens: 16,
    stream: streams > 0,
  }),
  concurrency,
  durationMs: streams > 0 ? 120_000 : durationMs,
  ...(streams > 0 ? { perWorker: 1 } : {}),
});
process.stdout.write(
  `${result.requests} requests, ${result.rps.toFixed(0)} req/s, p50 ${result.p50.toFixed(2)} ms, TTFT p50/p99 ${result.ttft50.toFixed(1)}/${result.ttft99.toFixed(1)} ms, errors ${result.errors}\n`,
);
const exited = new Promise((resolve) => ragport.child.once('exit', resolve));
ragport.child.disconnect();
await exited;
mock.child.kill();

const file = readdirSync(dir)
  .filter((f) => f.endsWith('.cpuprofile'))
  .map((f) => path.join(dir, f))
  .sort()
  .pop();
if (file === undefined) throw new Error(`no profile in ${dir}`);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
// Only the samples of the load (its last durationMs before the profile ended, shutdown aside),
// not those of start-up (module loading, the database opening).
const self = new Map<number, number>();
let at = profile.startTime;
const from = profile.endTime - (streams > 0 ? result.seconds * 1e6 : durationMs * 1000);
profile.samples.forEach((id, i) => {
  at += profile.timeDeltas[i] ?? 0;
  if (at >= from) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
});
const byFunction = new Map<string, number>();
let total = 0;
for (const node of profile.nodes) {
  const us = self.get(node.id) ?? 0;
  total += us;
  const where = node.callFrame.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/src\//, 'src/');
  const key = `${node.callFrame.functionName || '(anonymous)'} ${where}:${node.callFrame.lineNumber + 1}`;
  byFunction.set(key, (byFunction.get(key) ?? 0) + us);
}
process.stdout.write(`${file}\nself time, top 30 of ${(total / 1000).toFixed(0)} ms:\n`);
for (const [key, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, 30)) {
  process.stdout.write(`${((100 * us) / total).toFixed(1).padStart(5)}%  ${key}\n`);
}
