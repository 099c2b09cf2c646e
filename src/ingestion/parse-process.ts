/**
 * A parser process (forked by parse-pool.ts): parses one document at a time for its parent and
 * answers over the IPC channel. It holds no secrets and no database connection, and it exits when
 * its parent goes away, so a hostile file can at worst take this process down.
 */
import { setPriority } from 'node:os';
import { messageOf, ParseError } from './parsers/errors.ts';
import { parseDocument } from './parsers/index.ts';
import type { DocumentFormat, ParsedDocument, ParseLimits } from './parsers/types.ts';

/** Scheduling niceness of parser processes: the bulk lane's (embeddings/local.model.ts). */
export const PARSER_NICENESS = 10;

export interface ParseTask {
  id: number;
  format: DocumentFormat;
  bytes: Uint8Array;
  limits: ParseLimits;
}

export type ParseReply =
  | { type: 'ready' }
  | ({ type: 'parsed'; id: number } & ParsedDocument)
  /** `parseError`: the parser's own message for the user; otherwise an unexpected exception. */
  | { type: 'failed'; id: number; message: string; parseError: boolean };

const send = (reply: ParseReply): void => {
  process.send?.(reply);
};

async function run(task: ParseTask): Promise<void> {
  try {
    const parsed = await parseDocument(task.bytes, task.format, task.limits);
    send({ type: 'parsed', id: task.id, text: parsed.text, info: parsed.info });
  } catch (error) {
    send({ type: 'failed', id: task.id, message: messageOf(error), parseError: error instanceof ParseError });
  }
}

if (process.send === undefined) {
  process.stderr.write('parse-process.ts is started by the ingestion worker, not by hand\n');
  process.exit(2);
}
// Libraries sometimes leave a promise rejected after the parse settled; that is no reason to die.
process.on('unhandledRejection', (reason) => {
  process.stderr.write(`unhandled rejection in parser: ${messageOf(reason)}\n`);
});
process.on('disconnect', () => process.exit(0));
// Parsing is ingestion work: like the bulk lane's model threads, it yields the cores to requests
// (a scanned PDF's OCR, in processes this one starts, inherits it).
setPriority(PARSER_NICENESS);
process.on('message', (task: ParseTask) => void run(task));
send({ type: 'ready' });
