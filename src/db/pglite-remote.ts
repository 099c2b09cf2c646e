import { Worker } from 'node:worker_threads';
import type { Message, Request, WireError } from './pglite-protocol.ts';
import { inBackground, noteBackgroundStatement, noteInteractiveStatement, onInteractive } from './priority.ts';

/** What a statement may ask of the driver; `parsers` keys are types to return as PostgreSQL's text. */
export interface RemoteQueryOptions {
  rowMode?: 'array' | 'object';
  parsers?: Record<number, unknown>;
}

export interface RemoteResults<T = Record<string, unknown>> {
  rows: T[];
  affectedRows?: number;
  fields: { name: string; dataTypeID: number }[];
}

/** The part of PGlite's interface that drizzle (`drizzle-orm/pglite`) and ragport use. */
export interface RemoteQueryable {
  query<T>(sql: string, params?: unknown[], options?: RemoteQueryOptions): Promise<RemoteResults<T>>;
  exec(sql: string): Promise<RemoteResults[]>;
}

/** How long a statement or transaction waited for the embedded database's one session. */
export type WaitListener = (seconds: number, priority: 'interactive' | 'background') => void;

export interface RemotePglite extends RemoteQueryable {
  transaction<T>(callback: (tx: RemoteQueryable) => Promise<T>): Promise<T>;
  /** Calls `listener` with each wait for the session (statements and transactions outside one) until the returned function is called. */
  onWait(listener: WaitListener): () => void;
  listen(channel: string, callback: (payload: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
  readonly closed: boolean;
}

/** An error from the database thread, rebuilt with its class and its PostgreSQL fields (code, …). */
function rebuild(wire: WireError): Error {
  const error = wire.name === 'RangeError' ? new RangeError(wire.message) : new Error(wire.message);
  Object.assign(error, wire.fields);
  if (wire.name !== 'RangeError') error.name = wire.name;
  return error;
}

const workerUrl = new URL('./pglite.worker.ts', import.meta.url);

/**
 * Starts PGlite on a thread of its own (pglite.worker.ts) and answers for it on this one. `onExit`
 * runs if that thread dies: every statement in flight fails, and so does every later one.
 */
export async function startPgliteThread(
  dataDir: string | undefined,
  onExit: (error: Error) => void = () => undefined,
): Promise<RemotePglite> {
  const worker = new Worker(workerUrl, { workerData: { dataDir } });
  const pending = new Map<
    number,
    { resolve: (value: unknown) => void; reject: (error: Error) => void; background: boolean }
  >();
  const waitListeners = new Set<WaitListener>();
  const listeners = new Map<string, Set<(payload: string) => void>>();
  let nextId = 1;
  let closed = false;
  let gone: Error | undefined;

  // The thread keeps the process alive only while a statement is in flight, as a socket would.
  const track = () => (pending.size > 0 ? worker.ref() : worker.unref());

  const fail = (error: Error) => {
    if (gone) return;
    gone = error;
    for (const { reject } of pending.values()) reject(error);
    pending.clear();
    track();
    if (!closed) onExit(error);
  };

  await new Promise<void>((resolve, reject) => {
    const early = (error: Error) => reject(error);
    const earlyExit = (code: number) =>
      reject(new Error(`the embedded database thread exited (${code}) while opening`));
    worker.once('error', early);
    worker.once('exit', earlyExit);
    worker.once('message', (message: Message) => {
      worker.off('error', early);
      worker.off('exit', earlyExit);
      if ('ready' in message) resolve();
      else reject(new Error('the embedded database thread answered before it was ready'));
    });
  });

  worker.on('message', (message: Message) => {
    if ('notify' in message) {
      for (const callback of listeners.get(message.notify) ?? []) callback(message.payload);
      return;
    }
    if ('ready' in message) return;
    const response = message;
    const waiter = pending.get(response.id);
    if (!waiter) return;
    pending.delete(response.id);
    track();
    if (response.ok) {
      if (response.waitedMs !== undefined) {
        const priority = waiter.background ? 'background' : 'interactive';
        for (const listener of waitListeners) {
          try {
            listener(response.waitedMs / 1000, priority);
          } catch {
            // An observer's failure is not the statement's, and must not stop the replies.
          }
        }
      }
      waiter.resolve(response.value);
    } else waiter.reject(rebuild(response.error));
  });
  worker.on('error', (error: Error) => fail(new RangeError(`the embedded database thread failed: ${error.message}`)));
  worker.on('exit', (code) => fail(new RangeError(`the embedded database thread exited (${code})`)));
  track();

  type Op = Request extends infer R ? (R extends unknown ? Omit<R, 'id'> : never) : never;
  const call = <T>(request: Op): Promise<T> => {
    if (gone) return Promise.reject(gone);
    const id = nextId++;
    return new Promise<T>((resolve, reject) => {
      const background = 'background' in request && request.background === true;
      pending.set(id, { resolve: resolve as (value: unknown) => void, reject, background });
      track();
      worker.postMessage({ ...request, id });
    });
  };

  /** Inside a transaction, its id; outside, whether background work asks (it then waits its turn). */
  const scope = (tx: number | undefined) => {
    if (tx !== undefined) return { tx };
    if (!inBackground()) {
      noteInteractiveStatement();
      return {};
    }
    noteBackgroundStatement();
    return { background: true };
  };
  const queryable = (tx?: number): RemoteQueryable => ({
    query: <T>(sql: string, params: unknown[] = [], options: RemoteQueryOptions = {}) =>
      call<RemoteResults<T>>({
        op: 'query',
        sql,
        params,
        rowMode: options.rowMode ?? 'object',
        ...(options.parsers ? { rawTypes: Object.keys(options.parsers).map(Number) } : {}),
        ...scope(tx),
      }),
    exec: (sql: string) => call<RemoteResults[]>({ op: 'exec', sql, ...scope(tx) }),
  });

  // Fire and forget: the database thread only reorders its queue on it.
  const stopListening = onInteractive((active) => {
    if (!gone && !closed) void call({ op: 'interactive', active }).catch(() => undefined);
  });

  return {
    ...queryable(),
    async transaction<T>(callback: (tx: RemoteQueryable) => Promise<T>): Promise<T> {
      const tx = await call<number>({ op: 'begin', ...scope(undefined) });
      let result: T;
      try {
        result = await callback(queryable(tx));
      } catch (error) {
        await call({ op: 'end', tx, commit: false }).catch(() => undefined);
        throw error;
      }
      await call({ op: 'end', tx, commit: true });
      return result;
    },
    onWait(listener) {
      waitListeners.add(listener);
      return () => waitListeners.delete(listener);
    },
    async listen(channel, callback) {
      let set = listeners.get(channel);
      if (!set) {
        set = new Set();
        listeners.set(channel, set);
        await call({ op: 'listen', channel });
      }
      set.add(callback);
      return async () => {
        set.delete(callback);
        if (set.size > 0 || listeners.get(channel) !== set) return;
        listeners.delete(channel);
        if (!closed && !gone) await call({ op: 'unlisten', channel });
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      stopListening();
      if (!gone) await call({ op: 'close' }).catch(() => undefined);
      await worker.terminate();
    },
    get closed() {
      return closed || gone !== undefined;
    },
  };
}
