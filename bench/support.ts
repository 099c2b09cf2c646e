import { execSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { pino, type Logger } from 'pino';
import { buildApp, type App } from '../src/app.ts';
import { loadConfig, type Config } from '../src/config.ts';
import { openDatabase, type Database } from '../src/db/client.ts';
import { loadEmbeddings } from '../src/embeddings/load.ts';
import type { EmbeddingRegistry } from '../src/embeddings/registry.ts';
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

export interface BenchServerOptions {
  /** Settings over the environment's (loadConfig(process.env)). */
  config?: Partial<Config>;
  /** The embedding models; default: as the environment configures them (the local model loaded). */
  embeddings?: EmbeddingRegistry;
  /** Default: warnings only, to stderr. */
  logger?: Logger;
  /** The bench's own key (default: an admin key of the enterprise tier). */
  key?: Record<string, unknown>;
}

/**
 * A real ragport on a loopback port: the PostgreSQL server of `databaseUrl` (DATABASE_URL) when
 * set, else a fresh embedded database in a temporary directory, removed on close. The bench talks
 * to it over HTTP with a real key, created through the API as a user would.
 */
export async function startBenchServer(options: BenchServerOptions = {}): Promise<BenchServer> {
  const adminKey = `bench_${randomBase62(40)}`;
  const base = loadConfig(process.env);
  const databaseUrl = options.config && 'databaseUrl' in options.config ? options.config.databaseUrl : base.databaseUrl;
  const scratch = databaseUrl ? undefined : mkdtempSync(path.join(tmpdir(), 'ragport-bench-'));
  const config: Config = {
    ...base,
    logLevel: 'warn',
    ...options.config,
    databaseUrl,
    dataDir: scratch ?? options.config?.dataDir ?? base.dataDir,
    adminKey,
  };
  const logger = options.logger ?? pino({ level: 'warn' });
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolSize: 10 });
  await database.migrate();
  const embeddings = options.embeddings ?? (await loadEmbeddings(config, logger));
  const app = await buildApp({ config, database, limiter: createMemoryStore(), logger, embeddings });
  const port = await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${port}`;
  const created = await fetch(`${url}/api/v1/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(options.key ?? { name: 'bench', scopes: ['admin'], tier: 'enterprise' }),
  });
  if (created.status !== 201) throw new Error(`bench key: ${created.status} ${await created.text()}`);
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
      if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
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

/** A database of its own on the server (`<prefix>_<pid>`), dropped after, so earlier runs' data play no part. */
export async function withScratchDatabase<T>(
  url: string,
  prefix: string,
  work: (url: string) => Promise<T>,
): Promise<T> {
  const name = `${prefix}_${process.pid}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`drop database if exists ${name}`);
  await admin.query(`create database ${name}`);
  try {
    const scratch = new URL(url);
    scratch.pathname = `/${name}`;
    return await work(scratch.toString());
  } finally {
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
}

/**
 * `node src/server.ts` of the checkout at `serverRoot` as a process of its own on 127.0.0.1:`port`
 * with a bootstrap admin key, logging warnings and worse to this process's stderr; `env` over
 * this process's environment.
 */
export function spawnServer(
  serverRoot: string,
  port: number,
  adminKey: string,
  env: Record<string, string>,
): ChildProcess {
  return spawn(process.execPath, [path.join(serverRoot, 'src/server.ts')], {
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      RAGPORT_ADMIN_KEY: adminKey,
      LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}
