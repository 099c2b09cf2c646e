import { defineConfig } from 'vitest/config';
import { unsupportedNode } from './src/launch.mjs';

// `npm test` on an old Node stops with the sentence `npm start` gives, not with a page of failures.
const tooOld = unsupportedNode();
if (tooOld !== undefined) {
  process.stderr.write(`${tooOld}\n`);
  process.exit(1);
}

// CI asks for a machine-readable report beside the console output, without changing `npm test`.
const report = process.env.RAGPORT_TEST_REPORT;

/**
 * Three projects, so a developer can run the fast part alone (`npx vitest run --project unit`):
 * - unit: no database, no server, no child process (seconds);
 * - ops: processes started, killed and restarted — servers, workers, the keys CLI, parsers,
 *   sandboxed code (the slow, machine-sensitive part);
 * - api: everything else, a real server over a real database.
 * Every test file is in exactly one project: api is whatever the other two do not name.
 */
const unit = [
  'test/backup/tar.test.ts',
  'test/chatbots/prompt.test.ts',
  'test/config/**/*.test.ts',
  'test/docs/config-reference.test.ts',
  'test/docs/links.test.ts',
  'test/embeddings/bulk-lane.test.ts',
  'test/gateway/config.test.ts',
  'test/gateway/registry.test.ts',
  'test/gateway/sse.test.ts',
  'test/http/json-nesting.test.ts',
  'test/ingestion/parsers.test.ts',
  'test/logging/**/*.test.ts',
  'test/retrieval/session-turns.test.ts',
  'test/usage/**/*.test.ts',
];
const ops = [
  'test/ops/**/*.test.ts',
  'test/db/**/*.test.ts',
  'test/ingestion/recovery.test.ts',
  'test/ingestion/hostile.test.ts',
  'test/ingestion/parse-pool.test.ts',
  'test/processes/**/*.test.ts',
  'test/keys/keys.cli.test.ts',
  'test/ratelimit/multi-instance.test.ts',
  'test/ratelimit/redis-down.test.ts',
  'test/tools/code-execution.hostile.test.ts',
  'test/tools/code-execution.budget.test.ts',
];

export default defineConfig({
  test: {
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: report ? ['default', ['json', { outputFile: report }]] : ['default'],
    projects: [
      { extends: true, test: { name: 'unit', include: unit } },
      { extends: true, test: { name: 'api', include: ['test/**/*.test.ts'], exclude: [...unit, ...ops] } },
      { extends: true, test: { name: 'ops', include: ops } },
    ],
  },
});
