import { defineConfig } from 'vitest/config';

// CI asks for a machine-readable report beside the console output, without changing `npm test`.
const report = process.env.RAGPORT_TEST_REPORT;

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: report ? ['default', ['json', { outputFile: report }]] : ['default'],
  },
});
