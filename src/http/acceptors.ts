import { createServer, type Server as NetServer, type Socket } from 'node:net';
import type { Server as HttpServer } from 'node:http';

/**
 * libuv (since 1.50) takes one connection off a listening socket per event-loop turn. While a
 * thousand streams keep the loop busy a turn lasts milliseconds, so a burst of new connections
 * queues in the kernel for seconds before ragport reads a byte of them (measured: 1,000 streams
 * opened at once waited up to 2.7 s for their first token; the listen queue still held 600 of
 * them 300 ms in). More listening sockets on the same port (SO_REUSEPORT, the kernel spreads new
 * connections over them) take that many connections per turn; each hands its connections to the
 * one HTTP server, so routing, limits and shutdown are unchanged.
 */
export interface ListenOptions {
  host: string;
  port: number;
  /** Listening sockets; 1 is a plain listener, without SO_REUSEPORT (always 1 off Linux and FreeBSD). */
  acceptors: number;
  /** Each socket's accept queue (the kernel caps it at net.core.somaxconn). */
  backlog: number;
}

/** Where Node's `reusePort` balances connections over the sockets (elsewhere it is refused). */
const SHARED_PORTS = new Set<NodeJS.Platform>(['linux', 'freebsd']);

const listenOn = (server: NetServer | HttpServer, options: Record<string, unknown>) =>
  new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options, () => {
      server.off('error', reject);
      resolve();
    });
  });

/**
 * With SO_REUSEPORT a second process of the same user could bind the port too and silently take
 * half the connections; a plain socket bound first fails as a taken port always has (EADDRINUSE).
 */
async function assertPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  await listenOn(probe, { host, port, exclusive: true });
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}

/**
 * Makes `listenFirst` (the HTTP server's own listen, given whether to set SO_REUSEPORT) listen,
 * then opens the other acceptors on the port it got, each passing its connections to `http`.
 * Resolves to the port.
 */
export async function listenWithAcceptors(
  http: HttpServer,
  listenFirst: (reusePort: boolean) => Promise<unknown>,
  options: ListenOptions,
): Promise<number> {
  const acceptors = SHARED_PORTS.has(process.platform) ? options.acceptors : 1;
  const shared = acceptors > 1;
  if (shared) await assertPortFree(options.host, options.port);
  await listenFirst(shared);
  const address = http.address();
  const port = address !== null && typeof address === 'object' ? address.port : options.port;
  const extra: NetServer[] = [];
  const close = () =>
    Promise.all(extra.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve())))).then(
      () => undefined,
    );
  try {
    for (let i = 1; i < acceptors; i++) {
      const acceptor = createServer({ noDelay: true }, (socket: Socket) => {
        // The HTTP server stopped listening (shutdown): a connection that raced in is not served.
        if (http.listening) http.emit('connection', socket);
        else socket.destroy();
      });
      await listenOn(acceptor, { host: options.host, port, backlog: options.backlog, reusePort: true });
      extra.push(acceptor);
    }
  } catch (error) {
    await close();
    throw error;
  }
  // Closing the HTTP server stops every acceptor at once (its 'close' event waits for open
  // connections, too late: the others would go on accepting while it drains). Its callback waits
  // for theirs too: the HTTP server counts only the connections its own socket accepted, so it
  // called back while requests on the others were still running, and a graceful stop closed the
  // database and the model under them (500s, and answers cut by the exit).
  const closeServer = http.close.bind(http);
  http.close = (callback?: (err?: Error) => void) => {
    const acceptorsClosed = close();
    return closeServer((error?: Error) => {
      void acceptorsClosed.then(() => callback?.(error));
    });
  };
  return port;
}
