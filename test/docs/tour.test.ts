import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';

// The README's five-minute tour, executed: every curl command of the section runs through bash
// against a real server (a mock upstream plays the chat provider), and its answer must have the
// shape the README shows. A tour that drifts from the API fails here, not in a newcomer's shell.

const run = promisify(execFile);
const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

interface Step {
  command: string;
  expected: unknown;
}

/** The section's fenced blocks in order: each command block with the JSON answer after it. */
function tourSteps(markdown: string): Step[] {
  const start = markdown.indexOf('\n## A five-minute tour');
  const end = markdown.indexOf('\n## ', start + 1);
  const section = markdown.slice(start, end);
  const blocks = [...section.matchAll(/```(\w+)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1], text: m[2] as string }));
  const steps: Step[] = [];
  for (let i = 0; i < blocks.length; i++) {
    const block = blocks[i] as { lang: string; text: string };
    // Starting the server and pasting the key are the reader's part; the test does those itself.
    if (block.lang !== 'sh' || /npm start|^export KEY=/m.test(block.text)) continue;
    const next = blocks[i + 1];
    if (next?.lang !== 'json') throw new Error(`tour command without a documented answer:\n${block.text}`);
    steps.push({ command: block.text, expected: JSON.parse(next.text) });
  }
  return steps;
}

/**
 * The documented answer is a pattern: every field shown must be there; "…" in a string stands for
 * anything (after the prefix before it); numbers must be numbers; other values are exact.
 */
function mismatches(expected: unknown, actual: unknown, path = '$'): string[] {
  if (typeof expected === 'string') {
    if (typeof actual !== 'string') return [`${path}: expected a string, got ${JSON.stringify(actual)}`];
    const star = expected.indexOf('…');
    if (star >= 0) return actual.startsWith(expected.slice(0, star)) ? [] : [`${path}: ${actual} !~ ${expected}`];
    return actual === expected ? [] : [`${path}: ${JSON.stringify(actual)} !== ${JSON.stringify(expected)}`];
  }
  if (typeof expected === 'number') return typeof actual === 'number' ? [] : [`${path}: expected a number`];
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length < expected.length)
      return [`${path}: expected ${expected.length}+ items`];
    return expected.flatMap((e, i) => mismatches(e, actual[i], `${path}[${i}]`));
  }
  if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object') return [`${path}: expected an object`];
    return Object.entries(expected).flatMap(([k, v]) =>
      k in actual ? mismatches(v, (actual as Record<string, unknown>)[k], `${path}.${k}`) : [`${path}.${k}: missing`],
    );
  }
  return expected === actual ? [] : [`${path}: ${JSON.stringify(actual)} !== ${JSON.stringify(expected)}`];
}

let mock: MockUpstream;
let t: TestApp;
beforeAll(async () => {
  mock = await startMockUpstream({ apiKey: 'sk-tour', models: ['gpt-4o-mini'] });
  t = await startTestApp({
    gateway: { providers: [{ name: 'openai', base_url: mock.url, apiKey: 'sk-tour', models: ['gpt-4o-mini'] }] },
  });
});
afterAll(async () => {
  await t.close();
  await mock.close();
});

describe('the README tour', () => {
  const steps = tourSteps(readme);

  it('has the steps a newcomer needs: a key, a collection, a document, a search, a chat, a code run', () => {
    const all = steps.map((s) => s.command).join('\n');
    for (const needle of [
      '/api/v1/keys',
      '/rag/collections',
      '/documents',
      'rag_search',
      '/chat/completions',
      'code_execution',
    ]) {
      expect(all).toContain(needle);
    }
  });

  it('every command answers as documented', async () => {
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      RAGPORT: t.url,
      RAGPORT_ADMIN_KEY: t.adminKey,
    };
    for (const step of steps) {
      const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', step.command], { env, timeout: 60_000 });
      let answer: unknown;
      try {
        answer = JSON.parse(stdout);
      } catch {
        throw new Error(`not JSON from:\n${step.command}\n${stdout}`);
      }
      expect(mismatches(step.expected, answer), `${step.command}\n→ ${stdout}`).toEqual([]);
      // The tour tells the reader to keep the new key's secret; the test does the same.
      if (step.command.includes('/api/v1/keys')) env.KEY = (answer as { key: string }).key;
    }
  }, 120_000);
});
