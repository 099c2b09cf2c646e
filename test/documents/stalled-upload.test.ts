/**
 * A document's body that stops arriving is answered 408 and its connection closed; one that keeps
 * moving, however slowly, is read to its end, and once it is in, the answer may take its time.
 * Over real sockets, against the documents' routes behind the app's guard with a bound of 400 ms
 * instead of 60 s (the service behind them is a stand-in: the bound and the routes' handling of it
 * are what is tested; test/http/stalled-body.test.ts has the whole app).
 */
import { connect, type Socket } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentsRoutes } from '../../src/documents/documents.routes.ts';
import type { DocumentsService, Upload } from '../../src/documents/documents.service.ts';
import { installErrorHandling } from '../../src/http/error-handler.ts';
import { stalledBodyGuard } from '../../src/http/stalled-body.ts';
import { installJsonParser } from '../../src/http/json-body.ts';
import type { Principal } from '../../src/keys/principal.ts';

const idleMs = 400;
const received: Upload[] = [];
/** How long the stand-in takes to answer, as `?wait=true` would. */
let answerAfterMs = 0;

const record = (upload: Upload) => ({
  id: `doc_${received.length}`,
  name: upload.name,
  collection_name: 'kb',
  description: null,
  metadata: null,
  status: 'pending' as const,
  error: null,
  warning: null,
  chunk_count: 0,
  size_bytes: upload.bytes.length,
  content_type: 'text/plain',
  created_at: new Date(0).toISOString(),
  updated_at: new Date(0).toISOString(),
  processed_at: null,
  version: 1,
  replaced_at: null,
  progress: null,
});

const service = {
  async upload(_principal: unknown, _collection: string, upload: Upload) {
    received.push(upload);
    await new Promise((resolve) => setTimeout(resolve, answerAfterMs));
    return record(upload);
  },
} as unknown as DocumentsService;

const admin: Principal = {
  keyId: 'key_test',
  scopes: ['admin'],
  tier: 'enterprise',
  limits: { minute: null, hour: null, day: null },
  quota: { requestsPerDay: null, tokensPerMonth: null },
  collections: null,
};

let server: FastifyInstance;
let port: number;
beforeAll(async () => {
  server = Fastify({ logger: false });
  server.setValidatorCompiler(validatorCompiler);
  server.setSerializerCompiler(serializerCompiler);
  installJsonParser(server);
  installErrorHandling(server);
  server.decorateRequest('principal', null);
  server.addHook('onRequest', stalledBodyGuard(idleMs));
  server.addHook('onRequest', async (request) => {
    request.principal = admin;
  });
  await server.register(documentsRoutes(service, { uploadLimitBytes: 1_000_000 }));
  await server.listen({ port: 0, host: '127.0.0.1' });
  port = (server.server.address() as { port: number }).port;
});
afterAll(() => server.close());

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A connection that records what the server sends, and when it closes it. */
function open(): Promise<{ socket: Socket; text: () => string; closed: Promise<number> }> {
  return new Promise((resolve, reject) => {
    let text = '';
    const socket = connect(port, '127.0.0.1');
    socket.setEncoding('utf8');
    socket.on('data', (piece: string) => (text += piece));
    socket.on('error', reject);
    const closed = new Promise<number>((done) => socket.on('close', () => done(Date.now())));
    socket.on('connect', () => resolve({ socket, text: () => text, closed }));
  });
}

const head = (path: string, type: string, length: number) =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: ${type}\r\nContent-Length: ${length}\r\n\r\n`;

const boundary = 'StallBoundary';
const multipartBody = (content: string) =>
  `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slow.txt"\r\n` +
  `Content-Type: text/plain\r\n\r\n${content}\r\n--${boundary}--\r\n`;

describe('a body that stops arriving', () => {
  it.each([
    ['multipart', `multipart/form-data; boundary=${boundary}`, multipartBody('some of it')],
    ['JSON', 'application/json', JSON.stringify({ name: 'slow.txt', content: 'some of it' })],
  ])('%s: 408 once nothing arrived for the bound, and the connection closed', async (_kind, type, body) => {
    const { socket, text, closed } = await open();
    const started = Date.now();
    // Half the body, then nothing more.
    socket.write(head('/api/v1/rag/collections/kb/documents', type, body.length) + body.slice(0, body.length / 2));
    const at = await closed;
    expect(at - started).toBeGreaterThanOrEqual(idleMs - 50);
    expect(at - started).toBeLessThan(idleMs + 3_000);
    expect(text()).toMatch(/^HTTP\/1.1 408 /);
    expect(text()).toMatch(/\r\nconnection: close\r\n/i);
    expect(text().split('\r\n\r\n')[1]).toBe(
      JSON.stringify({ error: `The request body stalled: nothing arrived for ${idleMs / 1000} s` }),
    );
  });

  it('a slow body that keeps moving is read to its end, and the answer may then take longer than the bound', async () => {
    const content = 'slow but steady. '.repeat(20);
    const body = multipartBody(content);
    const { socket, text, closed } = await open();
    answerAfterMs = 3 * idleMs;
    try {
      socket.write(
        head('/api/v1/rag/collections/kb/documents', `multipart/form-data; boundary=${boundary}`, body.length),
      );
      // A piece every half bound: the whole body takes several times the bound.
      const pieces = body.match(/[\s\S]{1,40}/g) ?? [];
      for (const piece of pieces) {
        socket.write(piece);
        await pause(idleMs / 2);
      }
      expect(pieces.length * (idleMs / 2)).toBeGreaterThan(3 * idleMs);
      while (!text().includes('\r\n\r\n{')) await pause(50);
      expect(text()).toMatch(/^HTTP\/1.1 202 /);
      expect(received.at(-1)?.bytes.toString()).toBe(content);
      // The connection is kept alive past the bound: its next request is answered.
      await pause(2 * idleMs);
      const next = JSON.stringify({ name: 'next.txt', content: 'the next one' });
      answerAfterMs = 0;
      socket.write(head('/api/v1/rag/collections/kb/documents', 'application/json', next.length) + next);
      while ((text().match(/HTTP\/1.1 202 /g) ?? []).length < 2) await pause(50);
      expect(received.at(-1)?.name).toBe('next.txt');
    } finally {
      socket.end();
      await closed;
    }
  });
});
