import { type Dirent } from 'node:fs';
import { lstat, open, readdir } from 'node:fs/promises';
import path from 'node:path';

const BLOCK = 512;
/** Eleven octal digits: the largest size a ustar header holds (PostgreSQL's files stop at 1 GB). */
const MAX_SIZE = 8 ** 11 - 1;
const READ_BYTES = 1 << 20;

/** `value` as `width - 1` octal digits and a NUL, as ustar's numeric fields are written. */
function octal(header: Buffer, offset: number, width: number, value: number): void {
  header.write(`${value.toString(8).padStart(width - 1, '0')}\0`, offset, width, 'ascii');
}

/** A ustar header: a directory (`size` undefined) or a regular file. Owner-only modes, as PostgreSQL wants. */
function header(name: string, size: number | undefined, mtime: Date): Buffer {
  const block = Buffer.alloc(BLOCK);
  const entry = size === undefined ? `${name}/` : name;
  const bytes = Buffer.byteLength(entry);
  // Longer names go in two parts: `prefix` (155 bytes) + `/` + `name` (100 bytes).
  const split = bytes <= 100 ? -1 : entry.lastIndexOf('/', entry.length - 2);
  if (bytes > 100 && (split < 0 || Buffer.byteLength(entry.slice(split + 1)) > 100 || split > 155))
    throw new Error(`tar: path too long for a ustar header: ${entry}`);
  block.write(split < 0 ? entry : entry.slice(split + 1), 0, 100, 'utf8');
  if (split >= 0) block.write(entry.slice(0, split), 345, 155, 'utf8');
  octal(block, 100, 8, size === undefined ? 0o700 : 0o600);
  octal(block, 108, 8, 0);
  octal(block, 116, 8, 0);
  octal(block, 124, 12, size ?? 0);
  octal(block, 136, 12, Math.floor(mtime.getTime() / 1000));
  block.write(size === undefined ? '5' : '0', 156, 1, 'ascii');
  block.write('ustar\u000000', 257, 8, 'ascii');
  // The checksum is the byte sum of the header with its own field read as eight spaces.
  block.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'ascii');
  return block;
}

const padding = (size: number) => (size % BLOCK === 0 ? [] : [Buffer.alloc(BLOCK - (size % BLOCK))]);
const vanished = (error: unknown) => (error as NodeJS.ErrnoException).code === 'ENOENT';

export interface TreeOptions {
  /** Paths relative to the root whose contents are left out (the directory itself is kept). */
  emptied?: readonly string[];
  /** Paths relative to the root left out altogether. */
  omitted?: readonly string[];
  /** Whether the root has an entry of its own (default true). */
  rootEntry?: boolean;
}

/**
 * The tree under `root` as ustar entries named `name/…`, in buffers as they are read (never the
 * whole archive in memory); directories and regular files only. The tree may change while it is
 * read, as a running database's does: a file or directory gone by the time it is reached is left
 * out, and a file is archived at the size it had when opened (a shorter read is padded with
 * zeros), so the archive stays well formed. End the archive with `tarEnd()`.
 */
export async function* tarTree(root: string, name: string, options: TreeOptions = {}): AsyncGenerator<Buffer> {
  const emptied = new Set(options.emptied ?? []);
  const omitted = new Set(options.omitted ?? []);
  async function* walk(dir: string, entry: string, relative: string, own: boolean): AsyncGenerator<Buffer> {
    let children: Dirent[];
    try {
      if (own) yield header(entry, undefined, (await lstat(dir)).mtime);
      children = emptied.has(relative) ? [] : await readdir(dir, { withFileTypes: true });
    } catch (error) {
      if (vanished(error)) return;
      throw error;
    }
    for (const child of children.sort((a, b) => a.name.localeCompare(b.name))) {
      const childRelative = relative === '' ? child.name : `${relative}/${child.name}`;
      if (omitted.has(childRelative)) continue;
      const source = path.join(dir, child.name);
      const named = `${entry}/${child.name}`;
      if (child.isDirectory()) yield* walk(source, named, childRelative, true);
      else if (child.isFile()) yield* file(source, named);
    }
  }
  yield* walk(root, name, '', options.rootEntry ?? true);
}

async function* file(source: string, name: string): AsyncGenerator<Buffer> {
  let handle;
  try {
    handle = await open(source, 'r');
  } catch (error) {
    if (vanished(error)) return;
    throw error;
  }
  try {
    const { size, mtime } = await handle.stat();
    if (size > MAX_SIZE) throw new Error(`tar: ${name} is larger than a ustar entry holds`);
    yield header(name, size, mtime);
    let at = 0;
    while (at < size) {
      const { bytesRead, buffer } = await handle.read(Buffer.alloc(Math.min(READ_BYTES, size - at)), 0, undefined, at);
      if (bytesRead === 0) break;
      at += bytesRead;
      yield bytesRead === buffer.length ? buffer : buffer.subarray(0, bytesRead);
    }
    // Shorter than when it was opened (truncated meanwhile): the entry keeps its declared size.
    if (at < size) yield Buffer.alloc(size - at);
    yield* padding(size);
  } finally {
    await handle.close();
  }
}

/** One regular file with the given content. */
export function* tarFile(name: string, content: Buffer, mtime: Date): Generator<Buffer> {
  yield header(name, content.length, mtime);
  yield content;
  yield* padding(content.length);
}

/** The end of an archive: two zero blocks. */
export const tarEnd = (): Buffer => Buffer.alloc(BLOCK * 2);
