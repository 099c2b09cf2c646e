import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { createSpawner, type SpawnedChild, type Spawner } from '../processes/spawner.ts';
import type { ParseReply, ParseTask } from './parse-process.ts';
import { ParseError } from './parsers/errors.ts';
import type { OcrSettings } from './parsers/ocr.ts';
import type { DocumentFormat, ParsedDocument, ParseLimits } from './parsers/types.ts';

export interface ParsePoolOptions {
  /** Parser processes at most; further parses wait for one. */
  concurrency: number;
  /** Wall-clock limit of one parse; the process is killed past it. */
  timeoutMs: number;
  /** Resident memory of one parser process (JS heap and buffers alike); the process is killed past it. */
  memoryMb: number;
  logger: Logger;
  /** An idle parser process exits after this long. */
  idleMs?: number;
  /** Parses one process serves before it is replaced, so library caches cannot grow for ever. */
  maxTasksPerProcess?: number;
  /** OCR of PDF pages without a text layer; its time limit adds to a PDF's `timeoutMs`. */
  ocr?: OcrSettings;
  /** Forks the parser processes; without one the pool starts its own, and closes it with itself. */
  spawner?: Spawner;
}

export interface ParsePool {
  /** Parses in a parser process. Rejects with a ParseError for the document's own faults. */
  parse(bytes: Uint8Array, format: DocumentFormat, limits: ParseLimits, signal?: AbortSignal): Promise<ParsedDocument>;
  /** Kills every parser process and rejects waiting parses; a later parse starts new processes. */
  close(): Promise<void>;
}

/** The parser process died for a reason that is not known to be the document's: worth another attempt. */
export class ParserCrashed extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ParserCrashed';
  }
}

interface Parser {
  child: SpawnedChild;
  ready: Promise<void>;
  exited: Promise<void>;
  alive: boolean;
  tasks: number;
  /** The end of its stderr: V8 writes why it aborted there. */
  stderr: string;
  idleTimer?: NodeJS.Timeout;
}

const script = fileURLToPath(new URL('./parse-process.ts', import.meta.url));
const watchdogMs = 200;

/** Resident memory of a process in MB from /proc (Linux); 0 once it is gone. */
async function residentMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
  return kb === undefined ? 0 : Number(kb) / 1024;
}

const abortReason = (signal: AbortSignal | undefined): Error =>
  signal?.reason instanceof Error ? signal.reason : new Error('parse aborted');

const describeExit = (code: number | null, signal: NodeJS.Signals | null): string =>
  signal !== null ? `signal ${signal}` : `exit code ${String(code)}`;

/**
 * Parsing runs in child processes, never on the server's event loop. Worker threads were not
 * enough: their `resourceLimits` bound only the JS heap, while a PDF's compressed streams inflate
 * into ArrayBuffers outside it (a 300 kB file reached 1 GB), and V8 aborts the whole process, not
 * only the thread, when one large allocation crosses the heap limit (nodejs/node#47224). A child
 * process has its own heap limit, is watched for resident memory and wall-clock time, and when
 * it dies the server does not. The processes are forked by the process spawner
 * (processes/spawner.ts), so that the server's event loop never waits on a `fork()`.
 */
export function createParsePool(options: ParsePoolOptions): ParsePool {
  const { timeoutMs, memoryMb, logger } = options;
  const size = Math.max(1, options.concurrency);
  const idleMs = options.idleMs ?? 30_000;
  const maxTasks = options.maxTasksPerProcess ?? 100;
  const spawner = options.spawner ?? createSpawner({ logger });
  const watchMemory = existsSync('/proc/self/status');
  if (!watchMemory) logger.warn('no /proc on this system: parser processes are bounded by their JS heap only');

  const timedOut = (ms: number) =>
    new ParseError(
      `Parsing stopped after ${ms / 1000} s (the server's time limit): the file is too large or too complex to read`,
    );
  const outOfMemory = () =>
    new ParseError(
      `Parsing stopped: reading the file needed more than ${memoryMb} MB of memory (the server's limit); it is too large or too complex, or a decompression bomb`,
    );

  const idle: Parser[] = [];
  const all = new Set<Parser>();
  let running = 0;
  const waiting: { resolve: () => void; reject: (error: unknown) => void }[] = [];

  const start = (): Parser => {
    const child = spawner.fork(script, {
      // The parser needs nothing from the environment, and secrets stay out of it.
      env: {},
      execArgv: [`--max-old-space-size=${memoryMb}`],
    });
    const parser: Parser = {
      child,
      alive: true,
      tasks: 0,
      stderr: '',
      ready: Promise.resolve(),
      exited: Promise.resolve(),
    };
    child.on('stderr', (text) => {
      parser.stderr = (parser.stderr + text).slice(-4096);
    });
    parser.exited = new Promise((resolve) => {
      child.once('exit', () => {
        parser.alive = false;
        clearTimeout(parser.idleTimer);
        all.delete(parser);
        const at = idle.indexOf(parser);
        if (at >= 0) idle.splice(at, 1);
        resolve();
      });
    });
    parser.ready = new Promise((resolve, reject) => {
      // Loading the parsers takes a second or two on a busy machine; only a hung start is stopped.
      const timer = setTimeout(() => child.kill('SIGKILL'), Math.max(timeoutMs, 30_000));
      const settle = () => {
        clearTimeout(timer);
        child.off('message', onMessage);
        child.off('exit', onExit);
      };
      const onMessage = (reply: unknown) => {
        if ((reply as ParseReply).type !== 'ready') return;
        settle();
        resolve();
      };
      const onExit = (code: number | null, signal: NodeJS.Signals | null, error: string | undefined) => {
        settle();
        reject(
          new ParserCrashed(
            error !== undefined
              ? `The parser process could not start: ${error}`
              : `The parser process could not start (${describeExit(code, signal)})`,
          ),
        );
      };
      child.on('message', onMessage);
      child.on('exit', onExit);
    });
    all.add(parser);
    return parser;
  };

  const run = (parser: Parser, task: ParseTask, limitMs: number, signal: AbortSignal | undefined) =>
    new Promise<ParsedDocument>((resolve, reject) => {
      const { child } = parser;
      let stopped: 'timeout' | 'memory' | 'abort' | undefined;
      let settled = false;
      const kill = (reason: typeof stopped) => {
        if (settled) return;
        stopped ??= reason;
        child.kill('SIGKILL');
      };
      const timer = setTimeout(() => kill('timeout'), limitMs);
      const watchdog = watchMemory
        ? setInterval(() => {
            void residentMb(child.pid ?? 0).then((mb) => {
              if (mb > memoryMb) kill('memory');
            });
          }, watchdogMs)
        : undefined;
      const onAbort = () => kill('abort');
      const settle = () => {
        settled = true;
        clearTimeout(timer);
        clearInterval(watchdog);
        signal?.removeEventListener('abort', onAbort);
        child.off('message', onMessage);
        child.off('exit', onExit);
      };
      const onMessage = (message: unknown) => {
        const reply = message as ParseReply;
        if (reply.type === 'ready' || reply.id !== task.id) return;
        settle();
        if (reply.type === 'parsed') resolve({ text: reply.text, info: reply.info });
        else
          reject(new ParseError(reply.parseError ? reply.message : `The file could not be parsed: ${reply.message}`));
      };
      const onExit = (code: number | null, exitSignal: NodeJS.Signals | null) => {
        settle();
        if (stopped === 'abort') reject(abortReason(signal));
        else if (stopped === 'timeout') reject(timedOut(limitMs));
        else if (stopped === 'memory' || /heap out of memory/.test(parser.stderr)) reject(outOfMemory());
        else reject(new ParserCrashed(`The parser process stopped unexpectedly (${describeExit(code, exitSignal)})`));
      };
      child.on('message', onMessage);
      // Reported once stderr was read to the end, V8's "heap out of memory" included.
      child.on('exit', onExit);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (signal?.aborted) return kill('abort');
      const gone = () => {
        settle();
        reject(new ParserCrashed('The parser process stopped before it took the document'));
      };
      if (!parser.alive) return gone();
      // A child that cannot take the task is killed by the spawner: its exit settles the parse.
      child.send(task);
    });

  const acquire = (signal: AbortSignal | undefined): Promise<void> => {
    if (running < size) {
      running += 1;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const entry = {
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        reject,
      };
      const onAbort = () => {
        const at = waiting.indexOf(entry);
        if (at >= 0) waiting.splice(at, 1);
        reject(abortReason(signal));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      waiting.push(entry);
    });
  };

  // The slot passes straight to the next waiter, so `running` never drops below what is in use.
  const release = () => {
    const next = waiting.shift();
    if (next) next.resolve();
    else running -= 1;
  };

  const park = (parser: Parser) => {
    parser.tasks += 1;
    if (!parser.alive) return;
    if (parser.tasks >= maxTasks) {
      parser.child.kill('SIGKILL');
      return;
    }
    parser.idleTimer = setTimeout(() => parser.child.kill('SIGKILL'), idleMs);
    parser.idleTimer.unref();
    idle.push(parser);
  };

  let nextId = 1;
  return {
    async parse(bytes, format, limits, signal) {
      await acquire(signal);
      try {
        const parser = idle.pop() ?? start();
        clearTimeout(parser.idleTimer);
        await parser.ready;
        try {
          // A PDF may need OCR: its own time limit comes on top of the parse's.
          const ocr = format === 'pdf' ? options.ocr : undefined;
          const limitMs = timeoutMs + (ocr?.timeoutMs ?? 0);
          return await run(parser, { id: nextId++, format, bytes, limits: { ...limits, ocr } }, limitMs, signal);
        } finally {
          park(parser);
        }
      } finally {
        release();
      }
    },

    async close() {
      for (const entry of waiting.splice(0)) entry.reject(new Error('the parser pool is closed'));
      const exits = [...all].map((parser) => parser.exited);
      for (const parser of all) {
        // Unreferenced so that idle processes never hold the server open, but closing must see them go.
        parser.child.ref();
        parser.child.kill('SIGKILL');
      }
      await Promise.all(exits);
      if (options.spawner === undefined) await spawner.close();
    },
  };
}
