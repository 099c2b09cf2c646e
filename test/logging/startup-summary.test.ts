import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { createEmbeddingRegistry } from '../../src/embeddings/registry.ts';
import { startupSummary } from '../../src/startup-summary.ts';

const config = loadConfig({});
const summary = (facts: Partial<Parameters<typeof startupSummary>[0]>) =>
  startupSummary({
    config,
    database: 'pglite',
    embeddings: createEmbeddingRegistry({ local: new Map(), defaultLocal: config.embeddingModel }),
    tools: [],
    ...facts,
  });
const memoryLine = (nodeOptions: string[]) => summary({ nodeOptions }).find((line) => line.startsWith('memory: '));

describe('start-up summary: the young generation', () => {
  it('says the bound Node was started with', () => {
    expect(memoryLine(['--max-semi-space-size=16'])).toBe(
      'memory: young generation bounded (--max-semi-space-size=16)',
    );
    // NODE_OPTIONS first, the command line after: the last of a flag is the one Node applies.
    expect(memoryLine(['--max_semi_space_size=8', '--enable-source-maps', '--max-semi-space-size=32'])).toBe(
      'memory: young generation bounded (--max-semi-space-size=32)',
    );
  });

  it('without one, says how to bound it', () => {
    expect(memoryLine([])).toBe(
      'memory: young generation sized by V8 from the host; start with `npm start`, or pass --max-semi-space-size=16 to node, to bound it',
    );
    expect(memoryLine(['--max-old-space-size=512', '--max-semi-space-size'])).toMatch(/sized by V8 from the host/);
  });
});

describe("start-up summary: glibc's malloc arenas", () => {
  const allocator = (glibc: Parameters<typeof startupSummary>[0]['glibc']) =>
    summary({ glibc }).filter((line) => line.startsWith('allocator: '));

  it('says MALLOC_ARENA_MAX when it is set', () => {
    expect(allocator({ version: '2.36', arenaMax: '2' })).toEqual([
      'allocator: glibc 2.36, arenas bounded (MALLOC_ARENA_MAX=2)',
    ]);
  });

  it('without it, says how to bound them', () => {
    const unbounded = [
      'allocator: glibc 2.36, arenas per thread (up to 8 per core); start with `npm start`, or set MALLOC_ARENA_MAX=2 in the environment, to bound them',
    ];
    expect(allocator({ version: '2.36', arenaMax: undefined })).toEqual(unbounded);
    expect(allocator({ version: '2.36', arenaMax: '' })).toEqual(unbounded);
  });

  it('says nothing of arenas on another C library', () => {
    expect(allocator(null)).toEqual([]);
  });

  it("reads this process's own glibc and environment by default", () => {
    const line = summary({}).find((l) => l.startsWith('allocator: '));
    const glibc = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header
      .glibcVersionRuntime;
    if (glibc === undefined) expect(line).toBeUndefined();
    else expect(line).toContain(`allocator: glibc ${glibc}, arenas`);
  });
});

describe('start-up summary: ingestion', () => {
  const ingestionLine = (env: Record<string, string>, database: 'pglite' | 'postgres' = 'pglite') =>
    summary({ config: loadConfig(env), database }).find((line) => line.startsWith('ingestion: '));

  it('says how many documents this process ingests at once', () => {
    expect(ingestionLine({})).toBe('ingestion: 4 documents at once in this process');
  });

  it('off on the embedded database: nothing will ever process a document, and it says so', () => {
    expect(ingestionLine({ INGESTION_CONCURRENCY: '0' })).toMatch(
      /^ingestion: off \(INGESTION_CONCURRENCY=0\), and the embedded database takes no `npm run worker`: uploaded documents stay pending/,
    );
    expect(ingestionLine({ INGESTION_CONCURRENCY: '0', DATABASE_URL: 'postgres://u@h/db' }, 'postgres')).toMatch(
      /documents are processed by `npm run worker` processes$/,
    );
  });
});
