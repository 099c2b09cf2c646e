import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { createEmbeddingRegistry } from '../../src/embeddings/registry.ts';
import { startupSummary } from '../../src/startup-summary.ts';

const config = loadConfig({});
const memoryLine = (nodeOptions: string[]) =>
  startupSummary({
    config,
    database: 'pglite',
    embeddings: createEmbeddingRegistry({ local: new Map(), defaultLocal: config.embeddingModel }),
    tools: [],
    nodeOptions,
  }).find((line) => line.startsWith('memory: '));

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
