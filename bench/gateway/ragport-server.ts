import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { openPglite, openPostgres } from '../../src/db/client.ts';
import { gatewayConfigFrom } from '../../src/gateway/providers/config.ts';
import { createMemoryStore } from '../../src/ratelimit/memory.store.ts';
import { loadEmbeddings } from '../../src/embeddings/load.ts';
import { createEmbeddingRegistry } from '../../src/embeddings/registry.ts';

/**
 * ragport as deployed by default (request log at info, auth, rate limits, usage accounting),
 * over the embedded database or a PostgreSQL server, with one provider: the mock upstream.
 */
const upstream = process.env.BENCH_UPSTREAM_URL;
if (upstream === undefined) throw new Error('BENCH_UPSTREAM_URL is required');
const adminKey = 'bench_admin_key_0123456789abcdefghijklmnop';
// BENCH_DATABASE_URL: a PostgreSQL server (as deployed at scale); otherwise the embedded
// database in a fresh data directory, as `npm start` runs by default.
const databaseUrl = process.env.BENCH_DATABASE_URL;
const dataDir = databaseUrl ? undefined : mkdtempSync(path.join(tmpdir(), 'ragport-bench-'));
const database =
  dataDir === undefined
    ? openPostgres({ url: databaseUrl as string, poolSize: 10 })
    : await openPglite(path.join(dataDir, 'pg'));
await database.migrate();
const limiter = createMemoryStore();
// The request log is written and thrown away, so its cost is in the numbers.
const sink = new Writable({ write: (_chunk, _encoding, done) => done() });
const baseConfig = loadConfig(process.env);
// The gateway alone: no local embedding model in memory (BENCH_LOCAL_EMBEDDINGS=1 loads it, as a
// full default deployment would; it adds the model's ~400 MB to RSS) and no ingestion worker.
const embeddings = process.env.BENCH_LOCAL_EMBEDDINGS
  ? await loadEmbeddings(baseConfig, pino({ level: 'warn' }))
  : createEmbeddingRegistry({ local: new Map(), defaultLocal: baseConfig.embeddingModel });
const app = await buildApp({
  embeddings,
  config: {
    ...loadConfig({}),
    // As deployed: the server's URL also carries the API-key change notifications.
    databaseUrl,
    ingestionConcurrency: 0,
    adminKey,
    gateway: gatewayConfigFrom({
      providers: [{ name: 'mock', base_url: upstream, models: ['mock-chat'], max_connections: 2048 }],
    }),
  },
  database,
  limiter,
  logger: pino({ level: 'info' }, sink),
});
await app.server.listen({ port: 0, host: '127.0.0.1' });
const address = app.server.server.address();
if (address === null || typeof address === 'string') throw new Error('no address');
const created = await fetch(`http://127.0.0.1:${address.port}/api/v1/keys`, {
  method: 'POST',
  headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
  body: JSON.stringify({
    name: 'bench',
    scopes: ['chat'],
    tier: 'enterprise',
    rate_limits: { requests_per_minute: 100_000_000, requests_per_hour: 1_000_000_000 },
  }),
});
const { key } = (await created.json()) as { key: string };
// The runner asks for a memory breakdown alongside the RSS it reads from /proc.
process.on('message', (message) => {
  if (message === 'memory') process.send?.({ memory: process.memoryUsage() });
});
process.on('disconnect', () => {
  void app.server.close().then(async () => {
    await database.close();
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
    process.exit(0);
  });
});
process.send?.({ port: address.port, key });
