import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tarTree } from '../../src/backup/tar.ts';
import { scratchDirs } from '../support/scratch.ts';

const run = promisify(execFile);
const scratch = scratchDirs('ragport-tar-');

async function archive(root: string, name: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of tarTree(root, name)) parts.push(part);
  return Buffer.concat(parts);
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

  it('refuses a name no ustar header can hold', async () => {
    const root = scratch();
    writeFileSync(path.join(root, 'x'.repeat(120)), 'too long a file name');
    await expect(archive(root, 'tree')).rejects.toThrow(/path too long for a ustar header/);
  });
});
