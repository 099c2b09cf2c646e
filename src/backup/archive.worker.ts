/**
 * A backup's archive, made on a thread of its own at low priority: the tree read and packed as
 * tar (tar.ts), compressed here (not on libuv's shared pool, which serves the server's own file
 * and DNS work), and handed to the server's thread piece by piece as it asks (archive.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { gzipSync } from 'node:zlib';
import { lowerThreadPriority } from '../threads/niceness.ts';
import { tarTree } from './tar.ts';

if (!parentPort) throw new Error('archive.worker.ts runs as a worker thread');
const port = parentPort;
const { root, name } = workerData as { root: string; name: string };

/** Tar is compressed in pieces of about this size, each a gzip member (a gzip file may hold many). */
const PIECE_BYTES = 1 << 20;
/** Below the bulk embedding lane (10): a backup yields to everything. */
const NICENESS = 15;

export type ArchiveMessage = { piece: Uint8Array } | { end: true } | { error: string };

let credits = 0;
let wake: (() => void) | undefined;
port.on('message', () => {
  credits++;
  wake?.();
});

async function send(tar: Buffer[]): Promise<void> {
  const compressed = gzipSync(Buffer.concat(tar), { level: 1 });
  // A buffer of its own to transfer (a small Buffer may share Node's pool).
  const piece = new Uint8Array(compressed.length);
  piece.set(compressed);
  while (credits === 0) await new Promise<void>((resolve) => (wake = resolve));
  credits--;
  port.postMessage({ piece } satisfies ArchiveMessage, [piece.buffer]);
}

lowerThreadPriority(NICENESS);
try {
  let pending: Buffer[] = [];
  let size = 0;
  for await (const block of tarTree(root, name)) {
    pending.push(block);
    size += block.length;
    if (size < PIECE_BYTES) continue;
    await send(pending);
    pending = [];
    size = 0;
  }
  if (size > 0) await send(pending);
  port.postMessage({ end: true } satisfies ArchiveMessage);
} catch (error) {
  port.postMessage({ error: (error as Error).message } satisfies ArchiveMessage);
}
