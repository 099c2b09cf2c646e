/**
 * The spawner (started by spawner.ts while the server is still small): forks the server's child
 * processes on its behalf and relays their IPC messages, exits and stderr. It holds no secrets
 * (its environment is empty) and exits, its children killed, when the server goes away.
 */
import { fork, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import type { SpawnerReply, SpawnerRequest } from './spawner.ts';

const children = new Map<number, ChildProcess>();

const reply = (message: SpawnerReply): void => {
  process.send?.(message);
};

function start(request: Extract<SpawnerRequest, { op: 'fork' }>): void {
  const { id } = request;
  let child: ChildProcess;
  try {
    child = fork(request.script, [], {
      env: request.env,
      execArgv: request.execArgv,
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
  } catch (error) {
    reply({ op: 'exit', id, code: null, signal: null, error: error instanceof Error ? error.message : String(error) });
    return;
  }
  children.set(id, child);
  let failure: string | undefined;
  child.once('spawn', () => reply({ op: 'spawned', id, pid: child.pid ?? 0 }));
  child.on('error', (error) => {
    failure ??= error.message;
  });
  child.on('message', (message: unknown) => reply({ op: 'message', id, message }));
  child.stderr?.setEncoding('utf8');
  (child.stderr as Socket | null)?.on('data', (text: string) => reply({ op: 'stderr', id, text }));
  // 'close', not 'exit': by then stderr has been relayed to the end.
  child.once('close', (code, signal) => {
    children.delete(id);
    reply({ op: 'exit', id, code, signal, error: failure });
  });
}

function handle(request: SpawnerRequest): void {
  if (request.op === 'fork') return start(request);
  const child = children.get(request.id);
  if (child === undefined) return; // gone already: its exit is on its way
  if (request.op === 'kill') {
    child.kill(request.signal);
    return;
  }
  // A child that cannot take a message is no use to the server: it is replaced.
  child.send(request.message, (error) => {
    if (error !== null) child.kill('SIGKILL');
  });
}

if (process.send === undefined) {
  process.stderr.write('spawner-process.ts is started by the server, not by hand\n');
  process.exit(2);
}
process.on('message', handle);
// The server is gone (exited, killed or crashed): so are its children, even one stuck in a loop.
process.on('disconnect', () => {
  for (const child of children.values()) child.kill('SIGKILL');
  process.exit(0);
});
reply({ op: 'ready' });
