/**
 * Idle memory of a ragport server started as `npm start` starts it (MALLOC_ARENA_MAX=2,
 * --max-semi-space-size=16), with the embedding model loaded: RSS once `/readyz` answers 200 and
 * BENCH_SETTLE_SECONDS (30) later, after the worker threads' idle collections. On the embedded
 * database twice per round: a new data directory (the first start) and the same directory again
 * (every later start); with BENCH_DATABASE_URL also on that PostgreSQL server (in a scratch
 * database, dropped after). Beside the server's own RSS, its child processes' (the process
 * spawner) once settled. Each checkout of BENCH_SERVER_ROOTS (comma-separated; default this one)
 * in turn per round, BENCH_ROUNDS (2) rounds, so a before/after is measured side by side.
 *
 *   MODELS_DIR=… node bench/memory/idle.ts
 *   MODELS_DIR=… BENCH_SERVER_ROOTS=/tmp/before,. BENCH_DATABASE_URL=postgres://… node bench/memory/idle.ts
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { descendantPids } from '../../test/support/processes.ts';
import { saveResults, withScratchDatabase } from '../support.ts';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const roots = (process.env.BENCH_SERVER_ROOTS ?? here).split(',').map((r) => path.resolve(r));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const SETTLE_MS = Number(process.env.BENCH_SETTLE_SECONDS ?? 30) * 1_000;
if (!process.env.MODELS_DIR) throw new Error('MODELS_DIR is required: the server loads the embedding model');

const commitOf = (root: string) =>
  execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
const rssMb = (pid: number) =>
  Math.round(Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024);

const childrenMb = (pid: number) => descendantPids(pid).reduce((sum, child) => sum + rssMb(child), 0);

interface Sample {
  commit: string;
  database: string;
  start: string;
  readyMs: number;
  readyMb: number;
  settledMb: number;
  /** RSS of its child processes, settled. */
  childrenMb: number;
}

/** Starts the server, waits for readiness and the settle time, reads RSS at both, stops it. */
async function measure(root: string, env: Record<string, string>): Promise<Omit<Sample, 'database' | 'start'>> {
  const port = 19_000 + (process.pid % 500);
  const child = spawn(process.execPath, ['--max-semi-space-size=16', path.join(root, 'src/server.ts')], {
    env: {
      ...process.env,
      MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '2',
      ...env,
      PORT: String(port),
      HOST: '127.0.0.1',
      RAGPORT_ADMIN_KEY: `bench_admin_${'x'.repeat(32)}`,
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const pid = child.pid as number;
  const started = performance.now();
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ready) break;
      if (performance.now() - started > 120_000) throw new Error('server not ready after 120 s');
      await sleep(100);
    }
    const readyMs = Math.round(performance.now() - started);
    const readyMb = rssMb(pid);
    await sleep(SETTLE_MS);
    return { commit: commitOf(root), readyMs, readyMb, settledMb: rssMb(pid), childrenMb: childrenMb(pid) };
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

const samples: Sample[] = [];
const serverUrl = process.env.BENCH_DATABASE_URL;
for (let round = 1; round <= ROUNDS; round++) {
  for (const root of roots) {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'ragport-memory-bench-'));
    try {
      for (const start of ['new data directory', 'existing data directory']) {
        samples.push({ database: 'embedded', start, ...(await measure(root, { DATA_DIR: dataDir })) });
        process.stderr.write(`round ${round} ${JSON.stringify(samples.at(-1))}\n`);
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
    if (serverUrl) {
      const dataDir = mkdtempSync(path.join(tmpdir(), 'ragport-memory-bench-'));
      try {
        const sample = await withScratchDatabase(serverUrl, 'ragport_memory_bench', (url) =>
          measure(root, { DATA_DIR: dataDir, DATABASE_URL: url }),
        );
        samples.push({ database: 'PostgreSQL server', start: 'migrated database', ...sample });
        process.stderr.write(`round ${round} ${JSON.stringify(samples.at(-1))}\n`);
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    }
  }
}

const file = saveResults('memory-idle', { settleSeconds: SETTLE_MS / 1_000, samples });
console.log(
  `\nIdle RSS with the embedding model loaded (MALLOC_ARENA_MAX=2, --max-semi-space-size=16), ${cpus().length} cores; ` +
    `MB once ready / ${SETTLE_MS / 1_000} s later, one cell per round. Raw: ${path.relative(here, file)}\n`,
);
console.log(
  '| commit | database | start | ready after ms | RSS once ready MB | RSS settled MB | child processes settled MB |',
);
console.log('|---|---|---|---|---|---|---|');
const keys = [...new Set(samples.map((s) => `${s.commit}\u0000${s.database}\u0000${s.start}`))];
for (const key of keys) {
  const [commit, database, start] = key.split('\u0000') as [string, string, string];
  const rows = samples.filter((s) => s.commit === commit && s.database === database && s.start === start);
  const cell = (f: (s: Sample) => number) => rows.map(f).join(' / ');
  console.log(
    `| ${commit} | ${database} | ${start} | ${cell((s) => s.readyMs)} | ${cell((s) => s.readyMb)} | ${cell((s) => s.settledMb)} | ${cell((s) => s.childrenMb)} |`,
  );
}
