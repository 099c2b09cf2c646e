import { createReadStream } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';

const BLOCK = 512;
/** Eleven octal digits: the largest size a ustar header holds (PostgreSQL's files stop at 1 GB). */
const MAX_SIZE = 8 ** 11 - 1;

/** `value` as `width - 1` octal digits and a NUL, as ustar's numeric fields are written. */
function octal(header: Buffer, offset: number, width: number, value: number): void {
  header.write(`${value.toString(8).padStart(width - 1, '0')}\0`, offset, width, 'ascii');
}

/** A ustar header: a directory (`size` undefined) or a regular file. */
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
  octal(block, 100, 8, size === undefined ? 0o755 : 0o600);
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

/**
 * The tree under `root` as a POSIX ustar archive whose entries are named `name/…`, in buffers as
 * they are read (never the whole archive in memory). Directories and regular files only; the
 * tree must not change while it is read (a file whose size changed fails the archive).
 */
export async function* tarTree(root: string, name: string): AsyncGenerator<Buffer> {
  async function* walk(dir: string, entry: string): AsyncGenerator<Buffer> {
    yield header(entry, undefined, (await stat(dir)).mtime);
    const children = (await readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
    for (const child of children) {
      const source = path.join(dir, child.name);
      const named = `${entry}/${child.name}`;
      if (child.isDirectory()) {
        yield* walk(source, named);
        continue;
      }
      if (!child.isFile()) continue;
      const { size, mtime } = await stat(source);
      if (size > MAX_SIZE) throw new Error(`tar: ${named} is larger than a ustar entry holds`);
      yield header(named, size, mtime);
      let read = 0;
      if (size > 0)
        for await (const chunk of createReadStream(source, { end: size - 1, highWaterMark: 1 << 20 })) {
          read += (chunk as Buffer).length;
          yield chunk as Buffer;
        }
      if (read !== size) throw new Error(`tar: ${named} changed while it was read`);
      if (size % BLOCK !== 0) yield Buffer.alloc(BLOCK - (size % BLOCK));
    }
  }
  yield* walk(root, name);
  yield Buffer.alloc(BLOCK * 2);
}
