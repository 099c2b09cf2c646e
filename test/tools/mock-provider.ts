import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  url: URL;
  headers: IncomingMessage['headers'];
  body: string;
}

export interface MockReply {
  status: number;
  body: unknown;
  /** Milliseconds before answering. */
  delayMs?: number;
  /** Destroy the connection instead of answering. */
  hangUp?: boolean;
  headers?: Record<string, string>;
}

/**
 * A local HTTP server standing in for a search provider: it records each request and answers
 * with the next queued reply, else the default one.
 */
export async function startMockProvider(defaultReply: (request: RecordedRequest) => MockReply) {
  const requests: RecordedRequest[] = [];
  const queued: MockReply[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const recorded = {
        method: req.method ?? '',
        url: new URL(req.url ?? '/', 'http://mock'),
        headers: req.headers,
        body,
      };
      requests.push(recorded);
      const reply = queued.shift() ?? defaultReply(recorded);
      setTimeout(() => {
        if (reply.hangUp) {
          req.socket.destroy();
          return;
        }
        const text = typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body);
        res.writeHead(reply.status, {
          'content-type': typeof reply.body === 'string' ? 'text/html' : 'application/json',
          ...reply.headers,
        });
        res.end(text);
      }, reply.delayMs ?? 0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    /** Answers the next requests with these replies, in order. */
    queue: (...replies: MockReply[]) => queued.push(...replies),
    reset: () => {
      requests.length = 0;
      queued.length = 0;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export type MockProvider = Awaited<ReturnType<typeof startMockProvider>>;
