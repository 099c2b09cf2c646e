import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigError, envSchema, loadConfig } from '../../src/config.ts';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const configSection = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('## Operations'));
const documented = [...configSection.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1]);

describe('configuration', () => {
  it('every variable the code reads is in the README table, and nothing else is', () => {
    expect(documented.sort()).toEqual(Object.keys(envSchema.shape).sort());
  });

  it('defaults: port 8080, embedded database under ./data, in-process rate limits', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({ port: 8080, dataDir: './data', databaseUrl: undefined, redisUrl: undefined });
  });

  it('a bad value stops start-up with a message naming the variable', () => {
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(ConfigError);
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(/PORT/);
    expect(() => loadConfig({ RAGPORT_ADMIN_KEY: 'short' })).toThrow(/RAGPORT_ADMIN_KEY/);
    expect(() => loadConfig({ RATE_LIMIT_REDIS_FAILURE: 'maybe' })).toThrow(/RATE_LIMIT_REDIS_FAILURE/);
  });

  it('retrieval: 50 candidates per leg and 500 postings per query term unless set; candidates 1–1000', () => {
    expect(loadConfig({}).retrieval).toMatchObject({ candidates: 50, bm25: { termPostings: 500 } });
    expect(loadConfig({ RETRIEVAL_CANDIDATES: '200', BM25_TERM_POSTINGS: '0' }).retrieval).toMatchObject({
      candidates: 200,
      bm25: { termPostings: 0 },
    });
    expect(() => loadConfig({ RETRIEVAL_CANDIDATES: '0' })).toThrow(/RETRIEVAL_CANDIDATES/);
    expect(() => loadConfig({ RETRIEVAL_CANDIDATES: '1001' })).toThrow(/RETRIEVAL_CANDIDATES/);
  });

  it('TRUST_PROXY: false unless set; true, a number of proxies, or their addresses and CIDR ranges', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'true' }).trustProxy).toBe(true);
    expect(loadConfig({ TRUST_PROXY: 'no' }).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '2' }).trustProxy).toBe(2);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 127.0.0.1,loopback, fd00::/8' }).trustProxy).toEqual([
      '10.0.0.0/8',
      '127.0.0.1',
      'loopback',
      'fd00::/8',
    ]);
    for (const bad of ['maybe', '10.0.0.0/33', '300', '10.0.0.1,']) {
      expect(() => loadConfig({ TRUST_PROXY: bad }), bad).toThrow(/TRUST_PROXY: must be true, false, a number/);
    }
  });

  it('HNSW_EF_SEARCH: auto unless set; a number from 10 to 1000', () => {
    expect(loadConfig({}).retrieval.efSearch).toBe('auto');
    expect(loadConfig({ HNSW_EF_SEARCH: 'auto' }).retrieval.efSearch).toBe('auto');
    expect(loadConfig({ HNSW_EF_SEARCH: '300' }).retrieval.efSearch).toBe(300);
    for (const bad of ['5', '1001', 'fast', '12.5']) {
      expect(() => loadConfig({ HNSW_EF_SEARCH: bad })).toThrow(/HNSW_EF_SEARCH/);
    }
  });

  it('database and Redis URLs of another scheme, and METRICS_PORT equal to PORT, stop start-up naming the variable', () => {
    expect(() => loadConfig({ DATABASE_URL: 'http://127.0.0.1:5432/x' })).toThrow(
      /DATABASE_URL: must be a postgres:\/\/ or postgresql:\/\/ URL/,
    );
    expect(loadConfig({ DATABASE_URL: 'postgresql://u@h/db' }).databaseUrl).toBe('postgresql://u@h/db');
    expect(() => loadConfig({ REDIS_URL: 'http://127.0.0.1:6379' })).toThrow(
      /REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL/,
    );
    expect(loadConfig({ REDIS_URL: 'rediss://h:6380' }).redisUrl).toBe('rediss://h:6380');
    expect(() => loadConfig({ PORT: '9000', METRICS_PORT: '9000' })).toThrow(/METRICS_PORT: is PORT \(9000\)/);
  });

  it('empty variables, and variables of spaces only, count as unset', () => {
    expect(loadConfig({ DATABASE_URL: '', PORT: '' }).port).toBe(8080);
    // A space read as a number was 0: a random port, or no ingestion at all.
    const spaces = loadConfig({ PORT: ' ', INGESTION_CONCURRENCY: '  ', HOST: ' ' });
    expect(spaces).toMatchObject({ port: 8080, ingestionConcurrency: 4 });
    expect(spaces.host).toBe(loadConfig({}).host);
  });

  it('durations stop at an hour and counts at a sane bound: past 2^31 - 1 ms a timer fires at once', () => {
    for (const [name, value] of [
      ['SHUTDOWN_TIMEOUT_MS', '3000000000'],
      ['USAGE_FLUSH_INTERVAL_MS', '3000000000'],
      ['BODY_IDLE_TIMEOUT_MS', '3600001'],
      ['EMBEDDING_THREADS', '3000000000'],
      ['DATABASE_POOL_SIZE', '100000'],
    ]) {
      expect(() => loadConfig({ [name as string]: value }), name).toThrow(new RegExp(`${name}: .*<=`));
    }
    expect(loadConfig({ SHUTDOWN_TIMEOUT_MS: '3600000' }).shutdownTimeoutMs).toBe(3_600_000);
  });
});
