import { Writable } from 'node:stream';
import { pino } from 'pino';
import { loadConfig } from '../../src/config.ts';
import { gatewayConfigFrom } from '../../src/gateway/providers/config.ts';
import { createEmbeddingRegistry } from '../../src/embeddings/registry.ts';
import { startBenchServer } from '../support.ts';

/**
 * ragport as deployed by default (request log at info, auth, rate limits, usage accounting),
 * over the embedded database or a PostgreSQL server, with one provider: the mock upstream.
 */
const upstream = process.env.BENCH_UPSTREAM_URL;
if (upstream === undefined) throw new Error('BENCH_UPSTREAM_URL is required');
// BENCH_DATABASE_URL: a PostgreSQL server (as deployed at scale); otherwise the embedded
// database in a fresh data directory, as `npm start` runs by default.
const databaseUrl = process.env.BENCH_DATABASE_URL || undefined;
// The request log is written and thrown away, so its cost is in the numbers.
const sink = new Writable({ write: (_chunk, _encoding, done) => done() });
const env = loadConfig(process.env);
const server = await startBenchServer({
  config: {
    // Defaults, not this shell's settings, except LISTEN_ACCEPTORS and LISTEN_BACKLOG (to compare).
    ...loadConfig({}),
    listen: env.listen,
    // As deployed: the server's URL also carries the API-key change notifications.
    databaseUrl,
    ingestionConcurrency: 0,
    logLevel: 'info',
    gateway: gatewayConfigFrom({
      providers: [{ name: 'mock', base_url: upstream, models: ['mock-chat'], max_connections: 2048 }],
    }),
  },
  // The gateway alone: no local embedding model in memory (BENCH_LOCAL_EMBEDDINGS=1 loads it, as a
  // full default deployment would; it adds the model's ~400 MB to RSS) and no ingestion worker.
  ...(process.env.BENCH_LOCAL_EMBEDDINGS
    ? {}
    : { embeddings: createEmbeddingRegistry({ local: new Map(), defaultLocal: env.embeddingModel }) }),
  logger: pino({ level: 'info' }, sink),
  key: {
    name: 'bench',
    scopes: ['chat'],
    tier: 'enterprise',
    rate_limits: { requests_per_minute: 100_000_000, requests_per_hour: 1_000_000_000 },
  },
});
// The runner asks for a memory breakdown alongside the RSS it reads from /proc.
process.on('message', (message) => {
  if (message === 'memory') process.send?.({ memory: process.memoryUsage() });
});
process.on('disconnect', () => {
  void server.close().then(() => process.exit(0));
});
process.send?.({ port: Number(new URL(server.url).port), key: server.key });
