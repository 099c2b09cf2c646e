/**
 * Every route's body is bounded by idle time (`BODY_IDLE_TIMEOUT_MS`, here 400 ms): a JSON body
 * that stops half way is answered 408 in the route's error shape and its connection closed; one
 * that keeps moving is read and answered as usual. Over real sockets, against the whole app.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';

const idleMs = 400;
let t: TestApp;
let port: number;
beforeAll(async () => {
  t = await startTestApp({ config: { bodyIdleMs: idleMs, ingestionConcurrency: 0 } });
  port = Number(new URL(t.url).port);
});
afterAll(() => t.close());

/** Sends `parts` with `gapMs` between them; resolves with what came back and when the connection closed. */
function send(parts: string[], gapMs: number): Promise<{ text: string; afterMs: number }> {
  return new Promise((resolve, reject) => {
    let text = '';
    const started = Date.now();
    const socket = connect(port, '127.0.0.1');
    socket.setEncoding('utf8');
    socket.on('data', (piece: string) => {
      text += piece;
      // A complete answer on a kept-alive connection: done.
      if (/\r\n\r\n/.test(text) && !/connection: close/i.test(text)) socket.end();
    });
    socket.on('error', reject);
    socket.on('close', () => resolve({ text, afterMs: Date.now() - started }));
    const write = async () => {
      for (const [i, part] of parts.entries()) {
        if (i > 0) await new Promise((r) => setTimeout(r, gapMs));
        if (!socket.destroyed) socket.write(part);
      }
    };
    socket.on('connect', () => void write());
  });
}

const head = (path: string, length: number) =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.adminKey}\r\n` +
  `Content-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

describe('a JSON body that stops arriving', () => {
  it.each([
    ['/api/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }] }, 'structured'],
    ['/api/v1/embeddings', { model: 'm', input: 'hello' }, 'structured'],
    ['/api/v1/agent/tool-calling', { tool_name: 'code_execution', parameters: { code: '1' } }, 'simple'],
    ['/api/v1/rag/collections', { name: 'never' }, 'simple'],
  ])('%s: 408 in its error shape once nothing arrived for the bound, connection closed', async (path, json, shape) => {
    const body = JSON.stringify(json);
    const { text, afterMs } = await send([head(path, body.length) + body.slice(0, 10)], 0);
    expect(afterMs).toBeGreaterThanOrEqual(idleMs - 50);
    expect(afterMs).toBeLessThan(idleMs + 3_000);
    expect(text).toMatch(/^HTTP\/1.1 408 /);
    expect(text).toMatch(/\r\nconnection: close\r\n/i);
    expect(text).toMatch(/\r\nx-request-id: req_/i);
    const message = `The request body stalled: nothing arrived for ${idleMs / 1000} s`;
    const answer = JSON.parse(text.split('\r\n\r\n')[1] ?? '') as unknown;
    expect(answer).toEqual(
      shape === 'simple'
        ? { error: message }
        : { error: { message, type: 'invalid_request_error', code: 'request_timeout' } },
    );
  });

  it('nothing was created, and the server answers the next request', async () => {
    const r = await t.request('/api/v1/rag/collections/never');
    expect(r.status).toBe(404);
    // No warning or error: what the JSON reader reports once the connection closed is let go.
    expect(t.logs.filter((l) => (l.level as number) >= 40)).toEqual([]);
  });

  it('a request without a body is not bounded: a GET that waits longer than the bound is answered', async () => {
    await t.request('/api/v1/rag/collections', { method: 'POST', json: { name: 'waits' } });
    const upload = await t.request('/api/v1/rag/collections/waits/documents', {
      method: 'POST',
      json: { name: 'never-processed.txt', content: 'No worker runs here, so this stays pending.' },
    });
    const { id } = (await upload.json()) as { id: string };
    const started = Date.now();
    const waited = await t.request(`/api/v1/rag/documents/${id}?wait=true&timeout=2`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_900);
    expect(waited.status).toBe(200);
    expect(await waited.json()).toMatchObject({ id, status: 'pending' });
  });

  it('a body that keeps moving, each gap under the bound, is read and answered', async () => {
    const body = JSON.stringify({ name: 'slowly-made', description: 'x'.repeat(40) });
    const pieces = [head('/api/v1/rag/collections', body.length)];
    for (let i = 0; i < body.length; i += 16) pieces.push(body.slice(i, i + 16));
    // Five pieces' gaps add up to more than the bound; none alone reaches it.
    const { text } = await send(pieces, idleMs / 4);
    expect(pieces.length * (idleMs / 4)).toBeGreaterThan(idleMs);
    expect(text).toMatch(/^HTTP\/1.1 201 /);
    const r = await t.request('/api/v1/rag/collections/slowly-made');
    expect(r.status).toBe(200);
  });
});
