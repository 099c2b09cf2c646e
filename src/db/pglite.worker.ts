/**
 * The embedded PostgreSQL's own thread. PGlite runs PostgreSQL compiled to WebAssembly
 * synchronously on whatever thread calls it: on the server's thread, every statement (an HNSW
 * insert, a BM25 scan) held every request (issue 14: `/healthz` p50 509 ms while a collection
 * ingested). Here it has a thread of its own and the server talks to it by messages
 * (`pglite-remote.ts`); PGlite's own mutex still runs one statement or transaction at a time.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite, type Transaction } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';
import { createIdleCollector } from '../threads/idle-gc.ts';
import { initializeDataDir, isInitialized, startParams } from './pglite-init.ts';
import type { Request, Response, WireError } from './pglite-protocol.ts';
import { createPreparedStatements } from './pglite-statements.ts';
import { createPriorityGate } from './priority.ts';

if (!parentPort) throw new Error('pglite.worker.ts runs as a worker thread');
const port = parentPort;
const { dataDir } = workerData as { dataDir: string | undefined };

/**
 * bytea: sent as a binary parameter (the bytes themselves: PGlite's protocol writer sends any
 * Uint8Array so), read through Buffer's native hex codec. PGlite's own serializer goes byte by byte
 * through JS arrays and parseInt: a 50 MB upload held the thread for 20 s and took 2 GB; as hex
 * text through Buffer, a 2.3 MB original still took 71–118 ms to insert, 13–33 ms as bytes.
 */
const BYTEA = 17;
if (dataDir !== undefined && !isInitialized(dataDir)) await initializeDataDir(dataDir);
const pg = await PGlite.create({
  ...(dataDir === undefined ? {} : { dataDir }),
  extensions: { vector },
  startParams,
  serializers: {
    // A string (hex or escape form) goes as text, as before.
    [BYTEA]: (value: unknown) => value as string,
  },
  parsers: { [BYTEA]: (text: string) => new Uint8Array(Buffer.from(text.slice(2), 'hex')) },
});

const identity = (value: unknown) => value;

/** Each statement text is parsed once and run by name after (pglite-statements.ts). */
const statements = createPreparedStatements(pg);

/** Open transactions by id: the callback of `pg.transaction` waits for the server's decision. */
const transactions = new Map<number, { tx: Transaction; decide: (commit: boolean) => void; settled: Promise<void> }>();
let nextTransaction = 1;
/** Thrown inside a transaction's callback so that PGlite rolls it back. */
class Rollback extends Error {}

const listeners = new Map<string, () => Promise<void>>();

/**
 * PGlite runs one statement or transaction at a time, in arrival order. Everything outside a
 * transaction passes this gate first, so that a search does not queue behind ingestion's
 * statements (measured: `rag_search` p99 during ingestion …); a transaction holds it to its end.
 */
const gate = createPriorityGate();

/**
 * Interactive work under way on the server's thread holds background statements back, for at
 * most INTERACTIVE_HOLD_MS at a time: a server that never reported the end cannot starve them.
 */
const INTERACTIVE_HOLD_MS = 2_000;
let holdTimer: NodeJS.Timeout | undefined;
function setInteractive(active: boolean): void {
  clearTimeout(holdTimer);
  gate.pauseBackground(active);
  if (active) holdTimer = setTimeout(() => gate.pauseBackground(false), INTERACTIVE_HOLD_MS);
}

function wireError(error: unknown): WireError {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error), fields: {} };
  const fields: Record<string, string | number> = {};
  for (const [key, value] of Object.entries(error)) {
    if (typeof value === 'string' || typeof value === 'number') fields[key] = value;
  }
  return { name: error.name, message: error.message, fields };
}

/** Large byte strings (document originals) move to the server's thread instead of being copied. */
function transferables(rows: unknown[]): ArrayBuffer[] {
  const out: ArrayBuffer[] = [];
  for (const row of rows) {
    for (const value of Array.isArray(row) ? row : Object.values(row as object)) {
      if (
        value instanceof Uint8Array &&
        value.byteLength >= 65_536 &&
        value.byteOffset === 0 &&
        value.buffer instanceof ArrayBuffer &&
        value.buffer.byteLength === value.byteLength
      ) {
        out.push(value.buffer);
      }
    }
  }
  return out;
}

const reply = (response: Response, transfer: ArrayBuffer[] = []) => port.postMessage(response, transfer);
const waited = (ms: number | undefined) => (ms === undefined ? {} : { waitedMs: ms });

/** Takes the gate; resolves to how long that took, in milliseconds. */
async function acquire(backgroundWork: boolean): Promise<number> {
  const asked = performance.now();
  await gate.acquire(backgroundWork);
  return performance.now() - asked;
}

/**
 * Runs a statement in its transaction, or outside one once it holds the gate; also answers how
 * long it waited for the gate (undefined inside a transaction).
 */
async function inTurn<T>(
  request: { tx?: number; background?: boolean },
  run: (target: PGlite | Transaction) => Promise<T>,
): Promise<[T, number | undefined]> {
  if (request.tx !== undefined) {
    const open = transactions.get(request.tx);
    if (!open) throw new Error(`transaction ${request.tx} is not open`);
    return [await run(open.tx), undefined];
  }
  const waitedMs = await acquire(request.background === true);
  try {
    return [await run(pg), waitedMs];
  } finally {
    gate.release();
  }
}

async function handle(request: Request): Promise<void> {
  const { id } = request;
  switch (request.op) {
    case 'query': {
      const options = {
        rowMode: request.rowMode,
        ...(request.rawTypes ? { parsers: Object.fromEntries(request.rawTypes.map((oid) => [oid, identity])) } : {}),
      };
      const inTransaction = request.tx !== undefined;
      const [result, waitedMs] = await inTurn(request, () =>
        statements.query(request.sql, request.params, options, inTransaction),
      );
      reply({ id, ok: true, value: result, ...waited(waitedMs) }, transferables(result.rows));
      return;
    }
    case 'exec': {
      const [result, waitedMs] = await inTurn(request, (target) => target.exec(request.sql));
      reply({ id, ok: true, value: result, ...waited(waitedMs) });
      return;
    }
    case 'begin': {
      const waitedMs = await acquire(request.background === true);
      const txId = nextTransaction++;
      let started = false;
      let decide!: (commit: boolean) => void;
      const decision = new Promise<boolean>((resolve) => (decide = resolve));
      const settled = pg.transaction(async (tx) => {
        started = true;
        transactions.set(txId, { tx, decide, settled });
        reply({ id, ok: true, value: txId, waitedMs });
        if (!(await decision)) throw new Rollback();
      });
      // The promise is only awaited by `end`; a failure before the callback ran answers `begin`.
      // The gate is the transaction's until it has settled, however it ends.
      settled.then(gate.release, (error: unknown) => {
        gate.release();
        if (!started) reply({ id, ok: false, error: wireError(error) });
      });
      return;
    }
    case 'end': {
      const open = transactions.get(request.tx);
      if (!open) throw new Error(`transaction ${request.tx} is not open`);
      open.decide(request.commit);
      try {
        await open.settled;
      } catch (error) {
        if (!(error instanceof Rollback)) throw error;
      } finally {
        transactions.delete(request.tx);
      }
      reply({ id, ok: true, value: null });
      return;
    }
    case 'listen': {
      if (!listeners.has(request.channel)) {
        const channel = request.channel;
        listeners.set(channel, await pg.listen(channel, (payload) => port.postMessage({ notify: channel, payload })));
      }
      reply({ id, ok: true, value: null });
      return;
    }
    case 'unlisten': {
      const unsubscribe = listeners.get(request.channel);
      listeners.delete(request.channel);
      if (unsubscribe && !pg.closed) await unsubscribe();
      reply({ id, ok: true, value: null });
      return;
    }
    case 'interactive': {
      setInteractive(request.active);
      reply({ id, ok: true, value: null });
      return;
    }
    case 'close': {
      if (!pg.closed) await pg.close();
      reply({ id, ok: true, value: null });
      port.close();
      return;
    }
  }
}

const collector = createIdleCollector();
port.on('message', (request: Request) => {
  collector.busy();
  handle(request)
    .catch((error: unknown) => reply({ id: request.id, ok: false, error: wireError(error) }))
    .finally(() => collector.idle());
});
collector.busy(); // opening the database made garbage too
collector.idle();
port.postMessage({ ready: true });
