import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection } from '../support/documents.ts';
import { sharedData } from '../support/fixtures.ts';
import { startMockUpstream, type MockUpstream } from '../support/mock-upstream.ts';
import { startMockProvider } from '../tools/mock-provider.ts';

// The curl examples of the docs pages, executed: each page's `sh` blocks run in order through
// bash against a real server (mock upstreams play the chat, rerank and search providers), and an
// answer the page shows after a command must have its shape. The README's tour has its own test
// (tour.test.ts), which also checks values.

const run = promisify(execFile);

/**
 * In the order a reader would follow them: the README's curl examples outside its tour (which
 * tour.test.ts runs), then the chatbot guide, which creates the `staff-handbook` collection.
 */
const PAGES = ['README.md', 'docs/chatbots.md', 'docs/tools.md', 'docs/ingestion.md', 'docs/gateway.md'];
/** Pages whose curl examples need more than this test's server, run by the test named. */
const RUN_ELSEWHERE: Record<string, string> = {
  // A backup needs an embedded database with a data directory, and a second server to restore to.
  'docs/operations.md': 'test/ops/backup.test.ts',
};

interface Example {
  page: string;
  command: string;
  /** The answer the page shows after the command, when it shows one. */
  documented: unknown;
}

function examples(page: string): Example[] {
  let markdown = readFileSync(new URL(`../../${page}`, import.meta.url), 'utf8');
  if (page === 'README.md') {
    // The tour is tour.test.ts's; setting up and running the suite are not HTTP examples.
    const tour = markdown.indexOf('\n## A five-minute tour');
    markdown = markdown.slice(0, tour) + markdown.slice(markdown.indexOf('\n## ', tour + 1));
  }
  const blocks = [...markdown.matchAll(/```(\w+)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1], text: m[2] as string }));
  const out: Example[] = [];
  blocks.forEach((block, i) => {
    // Starting the server is the reader's part; the test runs its own.
    if (block.lang !== 'sh' || /npm start/.test(block.text) || !block.text.includes('curl')) return;
    const next = blocks[i + 1];
    out.push({ page, command: block.text, documented: next?.lang === 'json' ? JSON.parse(next.text) : undefined });
  });
  return out;
}

/**
 * The documented answer as a shape: every field shown is there with the same JSON type, arrays
 * shown non-empty are non-empty and their first item has the shape of the first one shown.
 */
function shapeMismatches(documented: unknown, actual: unknown, at = '$'): string[] {
  const kind = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
  if (documented === null) return [];
  if (kind(documented) !== kind(actual)) return [`${at}: ${kind(actual)} where the docs show ${kind(documented)}`];
  if (Array.isArray(documented)) {
    const items = actual as unknown[];
    if (documented.length === 0) return [];
    return items.length === 0 ? [`${at}: empty`] : shapeMismatches(documented[0], items[0], `${at}[0]`);
  }
  if (typeof documented === 'object') {
    return Object.entries(documented as Record<string, unknown>).flatMap(([k, v]) =>
      k in (actual as object)
        ? shapeMismatches(v, (actual as Record<string, unknown>)[k], `${at}.${k}`)
        : [`${at}.${k}: missing`],
    );
  }
  return [];
}

/** Every JSON value printed one after another (a block may run several commands). */
function jsonValues(stdout: string): unknown[] {
  const values: unknown[] = [];
  let rest = stdout.trim();
  while (rest.length > 0) {
    let end = 0;
    let depth = 0;
    let inString = false;
    for (let i = 0; i < rest.length; i++) {
      const c = rest[i];
      if (inString) {
        if (c === '\\') i++;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === '{' || c === '[') depth++;
      else if (c === '}' || c === ']') {
        if (--depth === 0) {
          end = i + 1;
          break;
        }
      }
    }
    if (end === 0) throw new Error(`not JSON: ${rest.slice(0, 300)}`);
    values.push(JSON.parse(rest.slice(0, end)));
    rest = rest.slice(end).trim();
  }
  return values;
}

let chat: MockUpstream;
let search: Awaited<ReturnType<typeof startMockProvider>>;
let t: TestApp;
let workdir: string;
/** The chatbot the guide's curl examples created, and the key it answers. */
let guide: { key: string; bot: string } | undefined;
const python = process.env.RAGPORT_TEST_PYTHON;
beforeAll(async () => {
  chat = await startMockUpstream({ apiKey: 'sk-docs', models: ['gpt-4o-mini', 'rerank-v3.5'], embeddingKind: 'words' });
  search = await startMockProvider(() => ({
    status: 200,
    body: {
      type: 'search',
      web: { results: [{ title: 'pgvector', url: 'https://github.com/pgvector/pgvector', description: 'HNSW' }] },
    },
  }));
  t = await startTestApp({
    gateway: {
      providers: [
        {
          name: 'openai',
          base_url: chat.url,
          apiKey: 'sk-docs',
          models: ['gpt-4o-mini'],
          rerank_models: ['rerank-v3.5'],
        },
      ],
    },
    config: {
      webSearch: { ...loadConfig({}).webSearch, brave: { apiKey: 'brave-docs-key-0123456789', baseUrl: search.url } },
      webhooks: { ...loadConfig({}).webhooks, signingKey: 'docs-signing-key-0123456789abcdefghij' },
    },
  });
  // The ingestion page uploads into a collection it does not create.
  await createCollection(t, 'kb');
  workdir = mkdtempSync(path.join(tmpdir(), 'ragport-docs-'));
  copyFileSync(sharedData('documents/crazyones.pdf'), path.join(workdir, 'handbook.pdf'));
});
afterAll(async () => {
  await t.close();
  await chat.close();
  await search.close();
  rmSync(workdir, { recursive: true, force: true });
});

describe('the docs pages’ examples', () => {
  it('every curl example answers, with the shape its page shows', async () => {
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      RAGPORT: t.url,
      RAGPORT_ADMIN_KEY: t.adminKey,
    };
    const seen = { document: '', conversation: '' };
    const ran: string[] = [];
    // The key the README has a user create first, with the webhooks scope the ingestion page asks
    // for; a page that creates its own key uses that one.
    const readmeKey = await t.createKey({
      name: 'docs',
      scopes: ['read', 'write', 'delete', 'chat', 'embeddings', 'tools', 'webhooks'],
    });
    let page = '';
    let botKey = '';
    for (const example of PAGES.flatMap(examples)) {
      if (example.page !== page) {
        page = example.page;
        env.RAGPORT = t.url;
        env.KEY = readmeKey.key;
      }
      // What a reader fills in by hand: the server's address, ids from earlier answers, the key
      // and chatbot id the page says to export.
      const command = example.command
        .replaceAll('http://localhost:8080', t.url)
        .replace(/^export (KEY|BOT)=.*$/gm, '')
        .replace(/^export OPENAI_API_KEY=.*$/gm, '')
        .replaceAll(/doc_(\.\.\.|…)/g, seen.document)
        .replaceAll(/conv_(\.\.\.|…)/g, seen.conversation);
      if (command.trim() === '') continue;
      // A page may point RAGPORT at /api/v1 itself (the chatbot guide does): its blocks share it.
      const exported = /^export RAGPORT=(\S+)$/m.exec(command)?.[1];
      if (exported) env.RAGPORT = exported;
      const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', command], { env, cwd: workdir, timeout: 60_000 });
      ran.push(command);
      if (/curl -sN/.test(command)) {
        expect(stdout, command).toMatch(/^data: \{/m);
        expect(stdout.trim().endsWith('data: [DONE]'), command).toBe(true);
        continue;
      }
      const answers = jsonValues(stdout);
      expect(answers.length, `${example.page}: no answer from\n${command}`).toBeGreaterThan(0);
      for (const answer of answers) {
        const record = answer as Record<string, unknown>;
        // The contract's error shape: `error` a message, or an object with one (a record's own
        // `error` field is null while nothing failed).
        const failed = typeof record.error === 'string' || (typeof record.error === 'object' && record.error !== null);
        expect(failed, `${example.page}: an error from\n${command}\n→ ${stdout}`).toBe(false);
        if (typeof record.key === 'string' && record.key.startsWith('rpk_')) env.KEY = record.key;
        if (typeof record.id === 'string' && record.id.startsWith('bot_')) {
          env.BOT = record.id;
          botKey = env.KEY as string; // a chatbot answers only the key that created it
        }
        if (typeof record.id === 'string' && record.id.startsWith('doc_')) seen.document = record.id;
        if (typeof record.conversation_id === 'string') seen.conversation = record.conversation_id;
      }
      if (example.documented !== undefined) {
        expect(shapeMismatches(example.documented, answers[0]), `${example.page}:\n${command}\n→ ${stdout}`).toEqual(
          [],
        );
      }
    }
    // Each page's examples ran (none was skipped by mistake).
    for (const page of PAGES) expect(examples(page).length, page).toBeGreaterThan(0);
    expect(ran.length).toBeGreaterThanOrEqual(12);
    expect(
      ran.some((c) => c.includes('"name": "my-app"')),
      "the README's first key",
    ).toBe(true);

    // The chatbot guide's Node example, with the official `openai` package, against that chatbot.
    const chatbots = readFileSync(new URL('../../docs/chatbots.md', import.meta.url), 'utf8');
    const js = /```js\n([\s\S]*?)```/.exec(chatbots.slice(chatbots.indexOf('OpenAI SDKs')))?.[1];
    expect(js, 'the chatbot guide has a Node SDK example').toBeDefined();
    const openai = pathToFileURL(createRequire(import.meta.url).resolve('openai')).href;
    const script =
      `const KEY = ${JSON.stringify(botKey)}, BOT = ${JSON.stringify(env.BOT)};\n` +
      (js as string)
        .replace(`from 'openai'`, `from ${JSON.stringify(openai)}`)
        .replaceAll('http://localhost:8080', t.url);
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { timeout: 60_000 });
    // The answer, the sources ragport adds, then the streamed reply.
    expect(stdout).toMatch(/\[\s*\{[\s\S]*document_id/);
    guide = { key: botKey, bot: env.BOT as string };
  }, 300_000);

  // The same guide's Python example, with the official `openai` package (.ci/sdk-python.sh
  // provides it; `bash .ci/run` sets RAGPORT_TEST_PYTHON).
  it.skipIf(!python)(
    'the chatbot guide’s Python SDK example answers, with its sources',
    async () => {
      expect(guide, 'runs after the curl examples, which create the chatbot').toBeDefined();
      const chatbots = readFileSync(new URL('../../docs/chatbots.md', import.meta.url), 'utf8');
      const code = /```python\n([\s\S]*?)```/.exec(chatbots.slice(chatbots.indexOf('OpenAI SDKs')))?.[1];
      expect(code, 'the chatbot guide has a Python SDK example').toBeDefined();
      const { key, bot } = guide as { key: string; bot: string };
      const script =
        `KEY = ${JSON.stringify(key)}\nBOT = ${JSON.stringify(bot)}\n` +
        (code as string).replaceAll('http://localhost:8080', t.url);
      const { stdout } = await run(python as string, ['-c', script], { timeout: 60_000 });
      expect(stdout).toMatch(/document_id/);
    },
    120_000,
  );
});

describe('which pages are covered', () => {
  it('every docs page with curl examples is one of the pages run above', () => {
    const pages = readdirSync(new URL('../../docs/', import.meta.url))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`)
      .filter((page) => examples(page).length > 0);
    expect(pages.sort()).toEqual([...PAGES.filter((p) => p.startsWith('docs/')), ...Object.keys(RUN_ELSEWHERE)].sort());
    for (const [page, test] of Object.entries(RUN_ELSEWHERE))
      expect(readFileSync(new URL(`../../${test}`, import.meta.url), 'utf8'), `${test} runs ${page}`).toContain(page);
  });
});
