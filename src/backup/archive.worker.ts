/**
 * A backup's archive, made on a thread of its own at low priority while the database runs: its
 * data directory read live and packed as tar (tar.ts), compressed here (not on libuv's shared
 * pool, which serves the server's own file and DNS work), and handed to the server's thread piece
 * by piece as it asks (archive.ts). First the data files; then, once the server has ended the
 * database's backup mode and sent its label, the write-ahead log written meanwhile and the label:
 * PostgreSQL's base backup, which a server started on it recovers to a consistent state.
 */
import path from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import { gzipSync } from 'node:zlib';
import { lowerThreadPriority } from '../threads/niceness.ts';
import { tarEnd, tarFile, tarTree } from './tar.ts';

if (!parentPort) throw new Error('archive.worker.ts runs as a worker thread');
const port = parentPort;
const { dataDir } = workerData as { dataDir: string };

/** Tar is compressed in pieces of about this size, each a gzip member (a gzip file may hold many). */
const PIECE_BYTES = 1 << 20;
/** Below the bulk embedding lane (10): a backup yields to everything. */
const NICENESS = 15;
/** The directory's name inside the archive. */
const ROOT = 'pg';
/** As pg_basebackup: runtime state whose contents a restored database must not inherit. */
const EMPTIED = [
  'pg_wal',
  'pg_replslot',
  'pg_stat_tmp',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_subtrans',
];
const OMITTED = ['postmaster.pid', 'postmaster.opts', 'backup_label', 'tablespace_map', 'current_logfiles'];

export type ToArchive = { credit: true } | { label: string };
export type FromArchive = { piece: Uint8Array } | { dataDone: true } | { end: true } | { error: string };

let credits = 0;
let label: string | undefined;
let wake: (() => void) | undefined;
port.on('message', (message: ToArchive) => {
  if ('credit' in message) credits++;
  else label = message.label;
  wake?.();
});
const until = async (ready: () => boolean) => {
  while (!ready()) await new Promise<void>((resolve) => (wake = resolve));
};

let pending: Buffer[] = [];
let size = 0;
async function flush(): Promise<void> {
  if (size === 0) return;
  const compressed = gzipSync(Buffer.concat(pending), { level: 1 });
  pending = [];
  size = 0;
  // A buffer of its own to transfer (a small Buffer may share Node's pool).
  const piece = new Uint8Array(compressed.length);
  piece.set(compressed);
  await until(() => credits > 0);
  credits--;
  port.postMessage({ piece } satisfies FromArchive, [piece.buffer]);
}
async function add(blocks: AsyncIterable<Buffer> | Iterable<Buffer>): Promise<void> {
  for await (const block of blocks) {
    pending.push(block);
    size += block.length;
    if (size >= PIECE_BYTES) await flush();
  }
}

lowerThreadPriority(NICENESS);
try {
  await add(tarTree(dataDir, ROOT, { emptied: EMPTIED, omitted: OMITTED }));
  await flush();
  port.postMessage({ dataDone: true } satisfies FromArchive);
  await until(() => label !== undefined);
  await add(tarTree(path.join(dataDir, 'pg_wal'), `${ROOT}/pg_wal`, { rootEntry: false }));
  await add(tarFile(`${ROOT}/backup_label`, Buffer.from(label as string), new Date()));
  await add([tarEnd()]);
  await flush();
  port.postMessage({ end: true } satisfies FromArchive);
} catch (error) {
  port.postMessage({ error: (error as Error).message } satisfies FromArchive);
}
