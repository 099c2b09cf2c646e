// @ts-check
/**
 * The spawner (started by spawner.ts while the server is still small): forks the server's child
 * processes on its behalf and relays their IPC messages, exits, stderr and output. It holds no
 * secrets (its environment is empty) and exits, its children killed, when the server goes away.
 * Plain JavaScript (type-checked from its JSDoc): a `.ts` file would load Node's type stripper
 * into this long-lived process, 74 MB resident against 45 MB.
 */
import { execFileSync, fork, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';

/** @typedef {import('node:child_process').ChildProcess} ChildProcess */
/** @typedef {import('./spawner.ts').SpawnerRequest} SpawnerRequest */
/** @typedef {import('./spawner.ts').SpawnerReply} SpawnerReply */

/** @type {Map<number, ChildProcess>} */
const children = new Map();
/** Spawned in process groups of their own: killed whole when the server goes. @type {WeakSet<ChildProcess>} */
const detached = new WeakSet();

/** @param {SpawnerReply} message */
const reply = (message) => {
  process.send?.(message);
};

/** @param {unknown} error */
const messageOf = (error) => (error instanceof Error ? error.message : String(error));

const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((candidate) => existsSync(candidate));

/**
 * A forked child ends with this process even when it cannot notice (its main thread held by a
 * program: a JavaScript run stuck in a thrown value's looping getter spun on for good after the
 * spawner was killed): started through `setpriv --pdeathsig KILL`, which execs Node in its place,
 * the kernel kills it when this process dies. Without setpriv it relies on `disconnect`.
 * @param {string[]} execArgv
 */
const dieWithSpawner = (execArgv) =>
  setpriv === undefined
    ? { execArgv }
    : { execPath: setpriv, execArgv: ['--pdeathsig', 'KILL', '--', process.execPath, ...execArgv] };

/** A Node script with an IPC channel. @param {Extract<SpawnerRequest, { op: 'fork' }>} request */
function start(request) {
  const { id } = request;
  /** @type {ChildProcess} */
  let child;
  try {
    child = fork(request.script, [], {
      env: request.env,
      ...dieWithSpawner(request.execArgv),
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
  } catch (error) {
    reply({ op: 'exit', id, code: null, signal: null, error: messageOf(error) });
    return;
  }
  children.set(id, child);
  /** @type {string | undefined} */
  let failure;
  child.once('spawn', () => reply({ op: 'spawned', id, pid: child.pid ?? 0 }));
  child.on('error', (error) => {
    failure ??= error.message;
  });
  child.on('message', (message) => reply({ op: 'message', id, message }));
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (/** @type {string} */ text) => reply({ op: 'stderr', id, text }));
  // 'close', not 'exit': by then stderr has been relayed to the end.
  child.once('close', (code, signal) => {
    children.delete(id);
    reply({ op: 'exit', id, code, signal, error: failure });
  });
}

/** A program with pipes. @param {Extract<SpawnerRequest, { op: 'spawn' }>} request */
function run(request) {
  const { id } = request;
  let ended = false;
  /** @type {(code: number | null, signal: NodeJS.Signals | null, error?: string) => void} */
  const end = (code, signal, error) => {
    if (ended) return;
    ended = true;
    children.delete(id);
    reply({ op: 'exit', id, code, signal, error });
  };
  /** @type {number[]} */
  const opened = [];
  /** @type {ChildProcess} */
  let child;
  try {
    const stdio = Array.from({ length: request.stdio }, (_, fd) => {
      const file = request.files[fd];
      if (file === undefined) return 'pipe';
      const opening = openSync(file, 'r');
      opened.push(opening);
      return opening;
    });
    child = spawn(request.command, request.args, {
      env: request.env,
      cwd: request.cwd,
      detached: request.detached,
      stdio,
    });
  } catch (error) {
    end(null, null, messageOf(error));
    return;
  } finally {
    for (const fd of opened) closeSync(fd);
  }
  children.set(id, child);
  if (request.detached) detached.add(child);
  child.once('spawn', () => reply({ op: 'spawned', id, pid: child.pid ?? 0 }));
  child.once('error', (error) => {
    if (child.pid === undefined) end(null, null, error.message);
  });
  for (const [fd, text] of Object.entries(request.inputs)) {
    const stream = /** @type {import('node:stream').Writable | null | undefined} */ (child.stdio[Number(fd)]);
    stream?.on('error', () => undefined); // the program may exit without reading it
    stream?.end(text);
  }
  const outputs = [child.stdout, child.stderr].filter((s) => s !== null);
  // One byte past the limit tells the caller it was crossed.
  let room = request.outputLimit + 1;
  for (const stream of outputs) {
    stream.on('data', (/** @type {Buffer} */ data) => {
      if (room <= 0) return;
      const part = data.length > room ? data.subarray(0, room) : data;
      room -= part.length;
      reply({ op: 'output', id, data: part });
    });
  }
  child.once('exit', (code, signal) => {
    // What it left running dies with it (a pid namespace, say); still, never wait on a pipe.
    const late = setTimeout(() => {
      for (const stream of outputs) stream.destroy();
      end(code, signal);
    }, 500);
    child.once('close', () => {
      clearTimeout(late);
      end(code, signal);
    });
  });
}

/** @param {ChildProcess} child @param {Extract<SpawnerRequest, { op: 'kill' }>} request */
function signal(child, request) {
  if (!request.group || child.pid === undefined) {
    child.kill(request.signal);
    return;
  }
  // Only while it has not exited: once reaped, its pid (and group id) may be another's.
  if (child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, request.signal);
  } catch {
    // the group is gone already
  }
}

/** @param {SpawnerRequest} request */
function handle(request) {
  if (request.op === 'fork') return start(request);
  if (request.op === 'spawn') return run(request);
  const child = children.get(request.id);
  if (child === undefined) return; // gone already: its exit is on its way
  if (request.op === 'kill') return signal(child, request);
  // A child that cannot take a message is no use to the server: it is replaced.
  child.send(request.message, (error) => {
    if (error !== null) child.kill('SIGKILL');
  });
}

if (process.send === undefined) {
  process.stderr.write('spawner-process.mjs is started by the server, not by hand\n');
  process.exit(2);
}
// No core files from anything started here: a JavaScript run that V8 aborts (a Map grown without
// end) wrote a 1.45 GB core each time where the system allows them (`ulimit -c unlimited`, systemd
// LimitCORE=infinity). Soft and hard limit 0, inherited by every child; without prlimit (not
// Linux), the system's own limit applies.
const prlimit = ['/usr/bin/prlimit', '/bin/prlimit'].find((candidate) => existsSync(candidate));
if (prlimit !== undefined) {
  try {
    execFileSync(prlimit, ['--pid', String(process.pid), '--core=0:0'], { stdio: 'ignore' });
  } catch {
    // The system's own limit applies.
  }
}
process.on('message', handle);
// A signal to the server's whole process group (Ctrl-C in a terminal, systemd's default
// KillMode=control-group) reached this process too, and it died at once, failing the runs and
// parses the server was draining (a Python run: 500). The server ends it when it has drained
// (close), or it follows the server when that is gone (disconnect).
for (const name of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(name, () => undefined);
// The server is gone (exited, killed or crashed): so are its children, even one stuck in a loop.
process.on('disconnect', () => {
  for (const child of children.values()) {
    signal(child, { op: 'kill', id: 0, signal: 'SIGKILL', group: detached.has(child) });
  }
  process.exit(0);
});
