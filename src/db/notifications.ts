import pg from 'pg';

export interface ListenOptions {
  url: string;
  channels: readonly string[];
  /** application_name of the connection, so that other processes can count the listeners. */
  name: string;
  onMessage(channel: string, payload: string): void;
  /** Messages may have been missed: the connection dropped, or has just been (re)established. */
  onGap(): void;
  onError(error: Error): void;
  retryMs?: number;
}

export interface Listener {
  /** Whether the LISTEN connection is up: only then does every message arrive. */
  readonly live: boolean;
  /** Runs a statement on the listening connection; rejects while it is down. */
  query<T extends object>(text: string, values?: unknown[]): Promise<T[]>;
  close(): Promise<void>;
}

/**
 * A PostgreSQL LISTEN on its own connection (a pooled one would lose it on release), reconnected
 * after any failure. Resolves after the first attempt, connected or not; until it is connected,
 * `live` is false and callers must not rely on messages.
 */
export async function listen(options: ListenOptions): Promise<Listener> {
  const retryMs = options.retryMs ?? 1_000;
  let current: pg.Client | undefined;
  let live = false;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  const dropped = new WeakSet<pg.Client>();

  const drop = (client: pg.Client, error?: Error) => {
    if (dropped.has(client)) return;
    dropped.add(client);
    if (current === client) current = undefined;
    live = false;
    options.onGap();
    if (error !== undefined && !closed) options.onError(error);
    client.end().catch(() => undefined);
    if (!closed) {
      retry = setTimeout(() => void connect(), retryMs);
      retry.unref();
    }
  };

  const connect = async () => {
    const client = new pg.Client({
      connectionString: options.url,
      application_name: options.name,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
    client.on('notification', (message) => {
      if (options.channels.includes(message.channel)) options.onMessage(message.channel, message.payload ?? '');
    });
    client.on('error', (error) => drop(client, error));
    client.on('end', () => drop(client));
    try {
      await client.connect();
      for (const channel of options.channels) await client.query(`listen ${client.escapeIdentifier(channel)}`);
    } catch (error) {
      drop(client, error as Error);
      return;
    }
    if (closed) {
      dropped.add(client);
      await client.end().catch(() => undefined);
      return;
    }
    current = client;
    // Whatever happened before this connection listened was not heard.
    options.onGap();
    live = true;
  };

  await connect();
  /** The last statement sent on the connection, settled or not. */
  let turn: Promise<unknown> = Promise.resolve();
  return {
    get live() {
      return live;
    },
    query: <T extends object>(text: string, values?: unknown[]) => {
      // One statement at a time on the connection: pg queues overlapping ones itself but deprecates
      // it (a DeprecationWarning at the first two key changes close together; an error under
      // --throw-deprecation). Whether the connection is up is asked when the statement's turn comes.
      const run = turn.then(async () => {
        if (current === undefined || !live) throw new Error('the listening connection is down');
        return (await current.query<T>(text, values)).rows;
      });
      turn = run.catch(() => undefined);
      return run;
    },
    close: async () => {
      closed = true;
      live = false;
      clearTimeout(retry);
      const client = current;
      current = undefined;
      if (client !== undefined) {
        dropped.add(client);
        await client.end().catch(() => undefined);
      }
    },
  };
}
