import { execSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { buildApp, type App } from '../src/app.ts';
import { loadConfig, type Config } from '../src/config.ts';
import { openDatabase, type Database } from '../src/db/client.ts';
import { loadEmbeddings } from '../src/embeddings/load.ts';
import { createMemoryStore } from '../src/ratelimit/memory.store.ts';
import { randomBase62 } from '../src/db/ids.ts';

export interface BenchServer {
  app: App;
  url: string;
  key: string;
  database: Database;
  config: Config;
  close(): Promise<void>;
}

/**
 * A real ragport on a loopback port: the PostgreSQL server of DATABASE_URL when set, else a fresh
 * embedded database in a temporary directory. The bench talks to it over HTTP with a real key.
 */
export async function startBenchServer(overrides: Partial<Config> = {}): Promise<BenchServer> {
  const adminKey = `bench_${randomBase62(40)}`;
  const base = loadConfig(process.env);
  const config: Config = {
    ...base,
    dataDir: base.databaseUrl ? base.dataDir : mkdtempSync(path.join(tmpdir(), 'ragport-bench-')),
    adminKey,
    logLevel: 'warn',
    ...overrides,
  };
  const logger = pino({ level: 'warn' });
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolSize: 10 });
  await database.migrate();
  const embeddings = await loadEmbeddings(config, logger);
  const app = await buildApp({ config, database, limiter: createMemoryStore(), logger, embeddings });
  await app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  const url = `http://127.0.0.1:${address.port}`;
  const created = await fetch(`${url}/api/v1/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bench', scopes: ['admin'], tier: 'enterprise' }),
  });
  const { key } = (await created.json()) as { key: string };
  return {
    app,
    url,
    key,
    database,
    config,
    close: async () => {
      await app.server.close();
      await database.close();
    },
  };
}

export async function api<T>(
  server: Pick<BenchServer, 'url' | 'key'>,
  method: string,
  route: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const response = await fetch(server.url + route, {
    method,
    headers: {
      authorization: `Bearer ${server.key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as T };
}

/** Runs `worker` over `items` with at most `concurrency` in flight. */
export async function pool<T, R>(
  items: readonly T[],
  concurrency: number,
  worker: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await worker(items[i] as T, i);
      }
    }),
  );
  return results;
}

export const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
};

/** Keeps raw numbers with the date and commit. */
export function saveResults(name: string, data: unknown): string {
  const dir = path.resolve(import.meta.dirname, 'results');
  mkdirSync(dir, { recursive: true });
  let commit = 'unknown';
  try {
    commit = execSync('git rev-parse --short HEAD', { cwd: import.meta.dirname })
      .toString()
      .trim();
  } catch {
    // not a git checkout
  }
  const date = new Date().toISOString();
  // Never overwrite an earlier run of the same day and commit.
  let file = path.join(dir, `${name}-${date.slice(0, 10)}-${commit}.json`);
  for (let n = 2; existsSync(file); n++) file = path.join(dir, `${name}-${date.slice(0, 10)}-${commit}-${n}.json`);
  writeFileSync(
    file,
    JSON.stringify(
      { date, commit, machine: { cores: globalThis.navigator?.hardwareConcurrency ?? 0 }, ...(data as object) },
      null,
      2,
    ),
  );
  return file;
}
