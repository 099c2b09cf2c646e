import { Writable } from 'node:stream';
import { buildApp, type App } from '../../src/app.ts';
import { loadConfig, type Config } from '../../src/config.ts';
import type { Database } from '../../src/db/client.ts';
import { gatewayConfigFrom } from '../../src/gateway/providers/config.ts';
import { randomBase62 } from '../../src/db/ids.ts';
import { createLogger } from '../../src/logging.ts';
import type { Socket } from 'node:net';
import type { Clock } from '../../src/keys/keys.service.ts';
import { createMemoryStore } from '../../src/ratelimit/memory.store.ts';
import type { RateLimitStore } from '../../src/ratelimit/ratelimit.ts';
import { openTestDatabase, type TestDatabase } from './database.ts';
import { call, type CallInit } from './http.ts';
import { testEmbeddings } from './embeddings.ts';
import { startMockUpstream, type MockUpstream } from './mock-upstream.ts';

export interface TestAppOptions {
  database?: Database;
  limiter?: RateLimitStore;
  clock?: Clock;
  config?: Partial<Config>;
  /** Gateway providers and settings, as in the RAGPORT_CONFIG file (keys given directly). */
  gateway?: Parameters<typeof gatewayConfigFrom>[0];
}

export interface TestApp {
  app: App;
  url: string;
  adminKey: string;
  config: Config;
  database: Database;
  /** The database's URL for other connections (PostgreSQL server, owned database only). */
  databaseUrl: string | undefined;
  /** Every log line the app wrote, parsed. */
  logs: Record<string, unknown>[];
  rawLogs: () => string;
  /** A request as the admin, or as `key` (none when null). */
  request(path: string, init?: CallInit): Promise<Response>;
  createKey(body: Record<string, unknown>): Promise<{ id: string; key: string } & Record<string, unknown>>;
  close(): Promise<void>;
}

/** A real ragport listening on a loopback port, over a real database. */
export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const owned: TestDatabase | undefined = options.database ? undefined : await openTestDatabase();
  const database = options.database ?? (owned as TestDatabase).database;
  const adminKey = options.config?.adminKey ?? `admin_${randomBase62(40)}`;
  const config: Config = {
    ...loadConfig({}),
    adminKey,
    logLevel: 'info',
    ...(options.gateway ? { gateway: gatewayConfigFrom(options.gateway) } : {}),
    ...options.config,
  };
  let raw = '';
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      raw += chunk.toString();
      for (const line of chunk.toString().split('\n'))
        if (line.trim()) logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const limiter = options.limiter ?? createMemoryStore();
  const app = await buildApp({
    config,
    database,
    limiter,
    embeddings: await testEmbeddings(),
    logger: createLogger('info', sink),
    ...(options.clock ? { clock: options.clock } : {}),
  });
  const port = await app.listen({ port: 0, host: '127.0.0.1' });
  // Connections the test clients opened and never sent a request on (fetch may open one ahead and
  // leave it when its request is aborted): the server's close waits for them until headersTimeout.
  const silent = new Set<Socket>();
  app.server.server.on('connection', (socket: Socket) => {
    silent.add(socket);
    socket.once('data', () => silent.delete(socket));
    socket.once('close', () => silent.delete(socket));
  });
  const url = `http://127.0.0.1:${port}`;

  const request: TestApp['request'] = (path, init = {}) =>
    call(url, path, { ...init, key: init.key === undefined ? adminKey : init.key });

  return {
    app,
    url,
    databaseUrl: owned?.url,
    adminKey,
    config,
    database,
    logs,
    rawLogs: () => raw,
    request,
    createKey: async (body) => {
      const response = await request('/api/v1/keys', { method: 'POST', json: body });
      if (response.status !== 201) throw new Error(`key creation failed: ${response.status} ${await response.text()}`);
      return (await response.json()) as { id: string; key: string };
    },
    close: async () => {
      const closing = app.server.close();
      for (const socket of silent) socket.destroy();
      await closing;
      if (!options.limiter) await limiter.close();
      await owned?.close();
    },
  };
}

/**
 * A test app whose gateway has one provider, `provider`, serving `model` as an embedding model
 * (and no chat model) from a mock upstream that answers vectors of `dimensions`; `close` stops
 * both.
 */
export async function startAppOnUpstreamEmbeddings(
  provider: string,
  model: string,
  dimensions: number,
): Promise<{ t: TestApp; upstream: MockUpstream; close: () => Promise<void> }> {
  const upstream = await startMockUpstream({ models: [model], embeddingDimensions: dimensions });
  const t = await startTestApp({
    gateway: { providers: [{ name: provider, base_url: upstream.url, models: [], embedding_models: [model] }] },
  });
  return {
    t,
    upstream,
    close: async () => {
      await t.close();
      await upstream.close();
    },
  };
}
