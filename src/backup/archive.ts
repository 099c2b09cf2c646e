import { Readable } from 'node:stream';
import { Worker } from 'node:worker_threads';
import type { FromArchive, ToArchive } from './archive.worker.ts';

const workerUrl = new URL('./archive.worker.ts', import.meta.url);

/**
 * A running embedded database's data directory as a gzipped tar (entries `pg/…`), made on a
 * worker thread (archive.worker.ts) and read here as a stream. Once the data files are in,
 * `endBackup` is called: it ends the database's backup mode and answers its backup label; the
 * write-ahead log and the label follow. A piece is made only when the stream asks for one, so a
 * slow reader holds a few in memory at most. Destroying the stream stops the thread.
 */
export function archiveDataDir(dataDir: string, endBackup: () => Promise<string>): Readable {
  const worker = new Worker(workerUrl, { workerData: { dataDir } });
  const send = (message: ToArchive) => worker.postMessage(message);
  let ended = false;
  const stream = new Readable({
    highWaterMark: 1 << 20,
    read() {
      send({ credit: true });
    },
    destroy(error, callback) {
      void worker.terminate().then(
        () => callback(error),
        () => callback(error),
      );
    },
  });
  worker.on('message', (message: FromArchive) => {
    if ('piece' in message) stream.push(Buffer.from(message.piece.buffer, 0, message.piece.byteLength));
    else if ('dataDone' in message)
      endBackup().then(
        (label) => send({ label }),
        (error: unknown) => stream.destroy(error as Error),
      );
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
