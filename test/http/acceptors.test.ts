/**
 * Listening with several acceptors (src/http/acceptors.ts): a burst of connections to a busy
 * server is taken in a few event-loop turns instead of one turn per connection, a port already
 * taken is still refused, and closing the server stops every acceptor.
 */
import { createServer, get, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { listenWithAcceptors } from '../../src/http/acceptors.ts';
import { startTestApp } from '../support/app.ts';

const servers: Server[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
});

async function serve(acceptors: number, port = 0) {
  const http = createServer((_req, res) => res.end('ok'));
  servers.push(http);
  const listening = await listenWithAcceptors(
    http,
    (reusePort) =>
      new Promise<void>((resolve) => http.listen({ host: '127.0.0.1', port, backlog: 1024, reusePort }, resolve)),
    { host: '127.0.0.1', port, acceptors, backlog: 1024 },
  );
  return { http, port: listening };
}

/**
 * Opens `count` connections while this thread is blocked (the kernel completes them and queues
 * them), then counts the event-loop turns the server needs to take them all.
 */
async function turnsToAccept(http: Server, port: number, count: number): Promise<number> {
  let turns = 0;
  let running = true;
  const tick = () => {
    turns++;
    if (running) setImmediate(tick);
  };
  let accepted = 0;
  const all = new Promise<void>((resolve) =>
    http.on('connection', () => {
      if (++accepted === count) resolve();
    }),
  );
  for (let i = 0; i < count; i++) sockets.push(connect(port, '127.0.0.1'));
  const until = Date.now() + 300;
  while (Date.now() < until); // a busy server: nothing is accepted while the loop works
  setImmediate(tick);
  await all;
  running = false;
  return turns;
}

describe('acceptors', () => {
  it('take a burst of queued connections in a few turns; one socket takes one per turn', async () => {
    const one = await serve(1);
    expect(await turnsToAccept(one.http, one.port, 200)).toBeGreaterThanOrEqual(190);
    const many = await serve(64);
    // The kernel spreads the 200 over 64 queues unevenly; the longest sets the number of turns.
    expect(await turnsToAccept(many.http, many.port, 200)).toBeLessThan(40);
  });

  it('refuse a port that is already taken, though the acceptors share theirs (SO_REUSEPORT)', async () => {
    const first = await serve(8);
    await expect(serve(8, first.port)).rejects.toMatchObject({ code: 'EADDRINUSE' });
    const plain = createServer();
    servers.push(plain);
    await expect(
      new Promise((resolve, reject) =>
        plain.once('error', reject).listen(first.port, '127.0.0.1', () => resolve(null)),
      ),
    ).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });

  it('all stop when the server closes: the port then refuses connections', async () => {
    const { http, port } = await serve(16);
    await new Promise<void>((resolve) => http.close(() => resolve()));
    servers.splice(servers.indexOf(http), 1);
    const attempts = await Promise.all(
      Array.from(
        { length: 32 },
        () =>
          new Promise<string>((resolve) => {
            const s = connect(port, '127.0.0.1');
            s.once('connect', () => {
              s.destroy();
              resolve('connected');
            });
            s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
          }),
      ),
    );
    expect(new Set(attempts)).toEqual(new Set(['ECONNREFUSED']));
  });
});

describe('closing with several acceptors', () => {
  it('calls back once the requests on every acceptor have been answered, not only on its own', async () => {
    const http = createServer();
    servers.push(http);
    // Which socket took each connection: the HTTP server's own, or another acceptor (seen before
    // the HTTP server makes itself every connection's server).
    const takenBy = new WeakMap<Socket, unknown>();
    http.prependListener('connection', (socket: Socket & { server?: unknown }) => takenBy.set(socket, socket.server));
    let entered = 0;
    let finished = 0;
    // Answered at once on the HTTP server's own socket, later on the others.
    http.on('request', (req: IncomingMessage, res: ServerResponse) => {
      entered++;
      res.once('finish', () => (finished = performance.now()));
      setTimeout(() => res.end('ok'), takenBy.get(req.socket) === http ? 0 : 400);
    });
    const port = await listenWithAcceptors(
      http,
      (reusePort) =>
        new Promise<void>((resolve) => http.listen({ host: '127.0.0.1', port: 0, backlog: 1024, reusePort }, resolve)),
      { host: '127.0.0.1', port: 0, acceptors: 16, backlog: 1024 },
    );
    const requests = Array.from(
      { length: 32 },
      () =>
        new Promise<number | undefined>((resolve, reject) =>
          get(`http://127.0.0.1:${port}/`, { agent: false }, (res) => {
            res.resume();
            res.once('end', () => resolve(res.statusCode));
          }).once('error', reject),
        ),
    );
    while (entered < 32) await new Promise((resolve) => setTimeout(resolve, 10));
    const closed = await new Promise<number>((resolve) => http.close(() => resolve(performance.now())));
    servers.splice(servers.indexOf(http), 1);
    expect(await Promise.all(requests)).toEqual(requests.map(() => 200));
    // Every answer was sent before the close called back.
    expect(finished).toBeGreaterThan(0);
    expect(finished).toBeLessThanOrEqual(closed);
  });
});

describe('the app with several acceptors', () => {
  it('answers requests on many fresh connections, whichever socket took them', async () => {
    const t = await startTestApp({ config: { listen: { acceptors: 16, backlog: 1024 } } });
    try {
      // A connection of its own for each (no agent: no keep-alive reuse).
      const answers = await Promise.all(
        Array.from(
          { length: 100 },
          () =>
            new Promise<number | undefined>((resolve, reject) =>
              get(`${t.url}/healthz`, { agent: false }, (res) => {
                res.resume();
                res.once('end', () => resolve(res.statusCode));
              }).once('error', reject),
            ),
        ),
      );
      expect(answers).toEqual(answers.map(() => 200));
    } finally {
      await t.close();
    }
  });
});
