import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tarEnd, tarFile, tarTree, type TreeOptions } from '../../src/backup/tar.ts';
import { scratchDirs } from '../support/scratch.ts';

const run = promisify(execFile);
const scratch = scratchDirs('ragport-tar-');

async function archive(root: string, name: string, options: TreeOptions = {}): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of tarTree(root, name, options)) parts.push(part);
  parts.push(tarEnd());
  return Buffer.concat(parts);
}

async function extract(tar: Buffer): Promise<string> {
  const file = path.join(scratch(), 'archive.tar');
  await writeFile(file, tar);
  const out = scratch();
  await run('tar', ['-xf', file, '-C', out]);
  return out;
}

describe('tarTree', () => {
  it('writes an archive system tar extracts to the same tree, byte for byte', async () => {
    const root = scratch();
    const deep = path.join(root, 'a'.repeat(60), 'b'.repeat(60));
    mkdirSync(deep, { recursive: true });
    mkdirSync(path.join(root, 'empty-dir'));
    const files: Record<string, Buffer> = {
      'empty-file': Buffer.alloc(0),
      'one-block': randomBytes(512),
      'odd-size': randomBytes(1_000),
      'large/three-megabytes': randomBytes(3 * 1024 * 1024 + 7),
      // Longer than the header's 100-byte name: stored with ustar's prefix field.
      [path.relative(root, path.join(deep, 'c'.repeat(30)))]: Buffer.from('deep'),
    };
    mkdirSync(path.join(root, 'large'));
    for (const [name, bytes] of Object.entries(files)) writeFileSync(path.join(root, name), bytes);

    const tarFile = path.join(scratch(), 'tree.tar');
    const tar = await archive(root, 'tree');
    expect(tar.length % 512).toBe(0);
    await writeFile(tarFile, tar);
    const { stdout } = await run('tar', ['-tf', tarFile]);
    expect(stdout.trim().split('\n')).toEqual(
      expect.arrayContaining(['tree/', 'tree/empty-dir/', 'tree/large/', 'tree/empty-file']),
    );
    const out = scratch();
    await run('tar', ['-xf', tarFile, '-C', out]);
    for (const [name, bytes] of Object.entries(files)) {
      expect(readFileSync(path.join(out, 'tree', name)).equals(bytes), name).toBe(true);
    }
  });

  it('leaves out what it is told to, and adds single files', async () => {
    const root = scratch();
    mkdirSync(path.join(root, 'pg_wal', 'archive_status'), { recursive: true });
    writeFileSync(path.join(root, 'pg_wal', '000000010000000000000001'), 'log');
    writeFileSync(path.join(root, 'postmaster.pid'), '4711');
    writeFileSync(path.join(root, 'PG_VERSION'), '17');
    const parts: Buffer[] = [];
    for await (const part of tarTree(root, 'pg', { emptied: ['pg_wal'], omitted: ['postmaster.pid'] }))
      parts.push(part);
    for await (const part of tarTree(path.join(root, 'pg_wal'), 'pg/pg_wal', { rootEntry: false })) parts.push(part);
    parts.push(...tarFile('pg/backup_label', Buffer.from('START WAL LOCATION: 0/2000028\n'), new Date()), tarEnd());
    const out = await extract(Buffer.concat(parts));
    expect(readdirSync(path.join(out, 'pg')).sort()).toEqual(['PG_VERSION', 'backup_label', 'pg_wal']);
    expect(readFileSync(path.join(out, 'pg/pg_wal/000000010000000000000001'), 'utf8')).toBe('log');
    expect(existsSync(path.join(out, 'pg/pg_wal/archive_status'))).toBe(true);
    expect(readFileSync(path.join(out, 'pg/backup_label'), 'utf8')).toBe('START WAL LOCATION: 0/2000028\n');
  });

  it('stays well formed while the tree changes: a file gone is left out, one cut short is padded', async () => {
    const root = scratch();
    writeFileSync(path.join(root, 'a'), 'first');
    writeFileSync(path.join(root, 'b'), 'removed before it is reached');
    const c = randomBytes(3_000);
    writeFileSync(path.join(root, 'c'), c);
    const parts: Buffer[] = [];
    for await (const part of tarTree(root, 'tree')) {
      parts.push(part);
      // Right after a file's header: its size is fixed, the next file not yet opened.
      if (part.length === 512 && part.subarray(0, 7).toString() === 'tree/a\0') unlinkSync(path.join(root, 'b'));
      if (part.length === 512 && part.subarray(0, 7).toString() === 'tree/c\0') truncateSync(path.join(root, 'c'), 100);
    }
    const out = await extract(Buffer.concat([...parts, tarEnd()]));
    expect(readdirSync(path.join(out, 'tree')).sort()).toEqual(['a', 'c']);
    const restored = readFileSync(path.join(out, 'tree', 'c'));
    expect(restored.length).toBe(3_000);
    expect(restored.subarray(0, 100).equals(c.subarray(0, 100))).toBe(true);
    expect(restored.subarray(100).every((byte) => byte === 0)).toBe(true);
  });

  it('refuses a name no ustar header can hold', async () => {
    const root = scratch();
    writeFileSync(path.join(root, 'x'.repeat(120)), 'too long a file name');
    await expect(archive(root, 'tree')).rejects.toThrow(/path too long for a ustar header/);
  });
});
