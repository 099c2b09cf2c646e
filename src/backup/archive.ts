import { Readable } from 'node:stream';
import { Worker } from 'node:worker_threads';
import type { ArchiveMessage } from './archive.worker.ts';

const workerUrl = new URL('./archive.worker.ts', import.meta.url);

/**
 * The tree under `root` as a gzipped tar with entries named `name/…`, made on a worker thread
 * (archive.worker.ts) and read here as a stream: a piece is made only when the stream asks for
 * one, so a slow reader holds at most a few in memory. Destroying the stream stops the thread.
 */
export function archiveTree(root: string, name: string): Readable {
  const worker = new Worker(workerUrl, { workerData: { root, name } });
  let ended = false;
  const stream = new Readable({
    highWaterMark: 4 << 20,
    read() {
      worker.postMessage('more');
    },
    destroy(error, callback) {
      void worker.terminate().then(
        () => callback(error),
        () => callback(error),
      );
    },
  });
  worker.on('message', (message: ArchiveMessage) => {
    if ('piece' in message) stream.push(Buffer.from(message.piece.buffer, 0, message.piece.byteLength));
    else if ('end' in message) {
      ended = true;
      stream.push(null);
      void worker.terminate();
    } else stream.destroy(new Error(`backup archive: ${message.error}`));
  });
  worker.once('error', (error: Error) => stream.destroy(error));
  worker.once('exit', (code) => {
    if (!ended && !stream.destroyed) stream.destroy(new Error(`backup archive: its thread exited (${code})`));
  });
  return stream;
}
