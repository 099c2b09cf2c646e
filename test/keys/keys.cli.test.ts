import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';

const run = promisify(execFile);
const cli = path.resolve(import.meta.dirname, '../../src/keys/keys.cli.ts');

let db: TestDatabase | undefined;
let dataDir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'ragport-cli-'));
  // On a PostgreSQL server the CLI uses a database of its own; otherwise the embedded one on disk.
  if (process.env.TEST_DATABASE_URL) {
    db = await openTestDatabase();
    env = { ...process.env, DATABASE_URL: db.url };
  } else {
    env = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: '' };
  }
});
afterAll(async () => {
  await db?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const keys = async (...args: string[]) => {
  const { stdout, stderr } = await run(process.execPath, [cli, ...args], { env });
  return { out: stdout ? (JSON.parse(stdout) as Record<string, unknown>) : {}, stderr };
};

// Each case spawns several CLI processes, each opening the database (PGlite: seconds apiece on a
// busy 2-core machine), so the suite-wide 30 s budget is too tight here.
describe('npm run keys', { timeout: 180_000 }, () => {
  it('creates, lists, rotates and revokes keys', async () => {
    const { out: created, stderr } = await keys(
      'create',
      '--name',
      'ops',
      '--scopes',
      'read,chat',
      '--tier',
      'premium',
    );
    expect(created.key).toMatch(/^rpk_/);
    expect(created).toMatchObject({ name: 'ops', scopes: ['read', 'chat'], tier: 'premium' });
    expect(stderr).toContain('shown only once');

    const { out: listed } = await keys('list');
    expect(JSON.stringify(listed)).toContain(created.id as string);
    expect(JSON.stringify(listed)).not.toContain(created.key as string);

    const { out: rotated } = await keys('rotate', created.id as string);
    expect(rotated.key).not.toBe(created.key);

    const { out: revoked } = await keys('revoke', created.id as string);
    expect(revoked).toEqual({ message: 'API key revoked', id: created.id });
    const { out: after } = await keys('list');
    expect(JSON.stringify(after)).not.toContain(created.id as string);
  });

  it('rejects bad flags with a message and a non-zero exit', async () => {
    await expect(keys('create', '--name', 'x', '--scopes', 'reed')).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('--scopes'),
    });
    await expect(keys('explode')).rejects.toMatchObject({ code: 2 });
    await expect(keys('list', 'extra')).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining("Unexpected argument 'extra' for list"),
    });
    // The flag as typed, not the schema's path (`--rate-limits.requests-per-minute`).
    await expect(
      keys('create', '--name', 'x', '--scopes', 'read', '--tier', 'enterprise', '--requests-per-minute', 'abc'),
    ).rejects.toMatchObject({ code: 1, stderr: expect.stringMatching(/^--requests-per-minute: /) });
    // Limits of a fixed tier are refused before a database is opened: none is created for it.
    const fresh = mkdtempSync(path.join(tmpdir(), 'ragport-cli-fresh-'));
    try {
      await expect(
        run(process.execPath, [cli, 'create', '--name', 'x', '--scopes', 'read', '--requests-per-minute', '5'], {
          env: { ...process.env, DATA_DIR: fresh, DATABASE_URL: '' },
        }),
      ).rejects.toMatchObject({
        code: 1,
        stderr: expect.stringContaining(
          '--requests-per-minute, --requests-per-hour and --requests-per-day can only be set with --tier enterprise',
        ),
      });
      expect(readdirSync(fresh)).toEqual([]);
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  });

  it('takes a date alone for --expires-at, as its first moment in UTC', async () => {
    const { out } = await keys('create', '--name', 'dated', '--scopes', 'read', '--expires-at', '2099-01-01');
    expect(out.expires_at).toBe('2099-01-01T00:00:00.000Z');
  });

  it.skipIf(process.env.TEST_DATABASE_URL)(
    'never makes a database elsewhere: a bad command is refused before, list on a DATA_DIR without one says so',
    async () => {
      const empty = mkdtempSync(path.join(tmpdir(), 'ragport-cli-empty-'));
      try {
        const inEmpty = { ...env, DATA_DIR: empty };
        await expect(run(process.execPath, [cli, 'bogus'], { env: inEmpty })).rejects.toMatchObject({ code: 2 });
        await expect(run(process.execPath, [cli, 'list'], { env: inEmpty })).rejects.toMatchObject({
          code: 1,
          stderr: expect.stringContaining(`No ragport database under DATA_DIR (${empty})`),
        });
        expect(readdirSync(empty)).toEqual([]);
      } finally {
        rmSync(empty, { recursive: true, force: true });
      }
    },
  );
});
