/** Messages between the server's thread and the embedded database's thread (pglite.worker.ts). */

type Id = { id: number };

// `background`: queued after interactive statements (src/db/priority.ts); ignored inside a transaction.

export type Request = Id &
  (
    | {
        op: 'query';
        sql: string;
        params: unknown[];
        rowMode: 'array' | 'object';
        rawTypes?: number[];
        tx?: number;
        background?: boolean;
      }
    | { op: 'exec'; sql: string; tx?: number; background?: boolean }
    /** Opens a transaction: answered with its id once PGlite has begun it. */
    | { op: 'begin'; background?: boolean }
    | { op: 'end'; tx: number; commit: boolean }
    | { op: 'listen'; channel: string }
    | { op: 'unlisten'; channel: string }
    | { op: 'close' }
    /** Interactive work is under way (true) or over (false): background statements wait meanwhile. */
    | { op: 'interactive'; active: boolean }
  );

/** An error crossing threads: its class name, message and PostgreSQL fields (code, detail, …). */
export interface WireError {
  name: string;
  message: string;
  fields: Record<string, string | number>;
}

/**
 * `waitedMs`: how long a statement or transaction outside a transaction waited for the session
 * (the priority gate) before it ran; absent inside a transaction, which holds the session already.
 */
export type Response = Id & ({ ok: true; value: unknown; waitedMs?: number } | { ok: false; error: WireError });

export type Message = Response | { notify: string; payload: string } | { ready: true };
