import { fork, type ChildProcess, type Serializable } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';

export type SpawnerRequest =
  | { op: 'fork'; id: number; script: string; execArgv: string[]; env: Record<string, string> }
  | ({ op: 'spawn'; id: number } & SpawnOptions)
  | { op: 'send'; id: number; message: Serializable }
  | { op: 'kill'; id: number; signal: NodeJS.Signals; group?: boolean };

/** A program with pipes: `files` open read-only at the given descriptors, `inputs` written to theirs and closed. */
export interface SpawnOptions {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  /** Its own process group (and session), which `kill(signal, { group: true })` signals whole. */
  detached: boolean;
  /** Descriptors 0 … stdio - 1 exist; 1 and 2 are relayed as `output`, the rest are inputs or files. */
  stdio: number;
  files: Record<number, string>;
  inputs: Record<number, string>;
  /**
   * Output relayed at most (bytes); what comes after is read and dropped, so a program printing
   * without end cannot fill the spawner or the channel before the caller's kill lands.
   */
  outputLimit: number;
}

export type SpawnerReply =
  | { op: 'spawned'; id: number; pid: number }
  | { op: 'message'; id: number; message: unknown }
  | { op: 'stderr'; id: number; text: string }
  /** What a spawned program wrote to stdout or stderr, in order. */
  | { op: 'output'; id: number; data: Uint8Array }
  /** After the child's stderr was relayed to the end; `error`: it could not be started or signalled. */
  | { op: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null; error?: string };

export interface SpawnedChildEvents {
  message: [message: unknown];
  stderr: [text: string];
  output: [data: Uint8Array];
  exit: [code: number | null, signal: NodeJS.Signals | null, error: string | undefined];
}

/** A Node child process forked by the spawner; the server talks to it through the spawner. */
export interface SpawnedChild extends EventEmitter<SpawnedChildEvents> {
  /** Its process id once started, for /proc; undefined before. */
  readonly pid: number | undefined;
  readonly alive: boolean;
  /** To the child's IPC channel (advanced serialization); a child that cannot take it is killed. */
  send(message: Serializable): void;
  /** `group`: its whole process group (a detached spawn's), while it has not exited. */
  kill(signal: NodeJS.Signals, options?: { group?: boolean }): void;
  /** While referenced (until it exits), the child's events keep this process's event loop alive. */
  ref(): void;
}

export interface Spawner {
  /** A Node script with an IPC channel (`send`, `message`) and its stderr relayed. */
  fork(script: string, options: { execArgv: string[]; env: Record<string, string> }): SpawnedChild;
  /** A program with pipes: its stdout and stderr relayed as `output`. */
  spawn(options: SpawnOptions): SpawnedChild;
  /** Kills every child and the spawner; a later fork starts a new spawner. */
  close(): Promise<void>;
}

const script = fileURLToPath(new URL('./spawner-process.mjs', import.meta.url));

interface Zygote {
  process: ChildProcess;
  children: Map<number, Child>;
  exited: Promise<void>;
  /** Children that keep the event loop alive. */
  refs: number;
  /** Stopped by close(): its children ending with it is expected, not worth a warning. */
  closing?: boolean;
}

class Child extends EventEmitter<SpawnedChildEvents> implements SpawnedChild {
  pid: number | undefined;
  alive = true;
  private referenced = false;

  private readonly zygote: Zygote;
  private readonly id: number;
  private readonly request: (message: SpawnerRequest) => void;

  constructor(zygote: Zygote, id: number, request: (message: SpawnerRequest) => void) {
    super();
    this.zygote = zygote;
    this.id = id;
    this.request = request;
  }

  send(message: Serializable): void {
    if (this.alive) this.request({ op: 'send', id: this.id, message });
  }

  kill(signal: NodeJS.Signals, options: { group?: boolean } = {}): void {
    if (this.alive) this.request({ op: 'kill', id: this.id, signal, group: options.group });
  }

  ref(): void {
    if (!this.alive || this.referenced) return;
    this.referenced = true;
    if (this.zygote.refs++ === 0) this.zygote.process.channel?.ref();
  }

  /** Called once, with the spawner's report of its end (or the spawner's own end). */
  ended(code: number | null, signal: NodeJS.Signals | null, error: string | undefined): void {
    if (!this.alive) return;
    this.alive = false;
    if (this.referenced && --this.zygote.refs === 0) this.zygote.process.channel?.unref();
    this.emit('exit', code, signal, error);
  }
}

/**
 * Starts child processes (document parsers, sandboxed Python runs) from a small process started
 * now, not from the server. `fork()` copies the page tables of the process that calls it and
 * blocks that process's event loop meanwhile: measured on a 2-core machine, ~5 ms from a 110 MB
 * process and 33–39 ms from an 860 MB one (the embedded server with its model and database is
 * 500–900 MB); parsers are replaced every hundred documents and every Python run is a new
 * process. The spawner, ~48 MB, forks in a few milliseconds on its own event loop; the server
 * only passes messages. Rejected: forking from a worker thread (the page tables are the whole
 * process's, copied under a lock its other threads' page faults wait on, and the work is the same).
 */
export function createSpawner({ logger }: { logger: Logger }): Spawner {
  let zygote: Zygote | undefined;
  let nextId = 1;

  const startZygote = (): Zygote => {
    const child = fork(script, [], {
      // The spawner needs nothing from the environment, and secrets stay out of it.
      env: {},
      execArgv: [],
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    // Idle, it never holds the server open; referenced children hold its channel (ref()).
    child.unref();
    child.channel?.unref();
    const started: Zygote = { process: child, children: new Map(), exited: Promise.resolve(), refs: 0 };
    started.exited = new Promise((resolve) => {
      let gone = false;
      const end = (reason: string) => {
        if (gone) return;
        gone = true;
        if (zygote === started) zygote = undefined;
        const orphans = [...started.children.values()];
        started.children.clear();
        if (orphans.length > 0 && started.closing !== true) logger.warn(`${reason}; its children went with it`);
        for (const orphan of orphans) orphan.ended(null, 'SIGKILL', reason);
        resolve();
      };
      child.once('exit', () => end('the process spawner stopped'));
      child.on('error', (error) => {
        logger.warn({ err: error }, 'process spawner');
        // Never started (no 'exit' need follow): what was asked of it fails now, not at a timeout.
        if (child.pid === undefined) end(`the process spawner could not start: ${error.message}`);
      });
    });
    child.on('message', (reply: SpawnerReply) => {
      const target = started.children.get(reply.id);
      if (target === undefined) return;
      switch (reply.op) {
        case 'spawned':
          target.pid = reply.pid;
          return;
        case 'message':
          target.emit('message', reply.message);
          return;
        case 'stderr':
          target.emit('stderr', reply.text);
          return;
        case 'output':
          target.emit('output', reply.data);
          return;
        case 'exit':
          started.children.delete(reply.id);
          target.ended(reply.code, reply.signal, reply.error);
      }
    });
    return started;
  };

  // Now, while the process is small: a later start would cost what the spawner is there to save.
  zygote = startZygote();

  const start = (order: (id: number) => SpawnerRequest): SpawnedChild => {
    zygote ??= startZygote();
    const current = zygote;
    const id = nextId++;
    const request = (message: SpawnerRequest) => {
      if (current.process.connected) current.process.send(message);
    };
    const child = new Child(current, id, request);
    current.children.set(id, child);
    request(order(id));
    return child;
  };

  return {
    fork: (childScript, options) =>
      start((id) => ({ op: 'fork', id, script: childScript, execArgv: options.execArgv, env: options.env })),
    spawn: (options) => start((id) => ({ op: 'spawn', id, ...options })),

    async close() {
      const current = zygote;
      zygote = undefined;
      if (current === undefined) return;
      // Disconnecting is the spawner's signal to kill its children and exit.
      current.closing = true;
      current.process.ref();
      if (current.process.connected) current.process.disconnect();
      else current.process.kill('SIGKILL');
      await current.exited;
    },
  };
}
