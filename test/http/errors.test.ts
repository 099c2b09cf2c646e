import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { until } from '../support/poll.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ config: { bodyLimitBytes: 64 * 1024 } });
});
afterAll(async () => {
  await t.close();
});

const structured = (code: string, type = 'invalid_request_error') => ({
  error: expect.objectContaining({ type, code, message: expect.any(String) }),
});

describe('bad input never yields a 500', () => {
  it('malformed JSON is 400 invalid_json', async () => {
    const response = await t.request('/api/v1/keys', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name": "x", ',
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual(structured('invalid_json'));
  });

  it('no body where one is needed is 400 saying it is missing, with or without a JSON content type', async () => {
    const missing = 'Request body is missing: send a JSON object';
    for (const init of [{ headers: { 'content-type': 'application/json' }, body: ' ' }, {}]) {
      const response = await t.request('/api/v1/keys', { method: 'POST', ...init });
      expect(response.status).toBe(400);
      expect(await response.json()).toEqual({
        error: { type: 'invalid_request_error', code: 'missing_field', message: missing },
      });
      const collection = await t.request('/api/v1/rag/collections', { method: 'POST', ...init });
      expect(collection.status).toBe(400);
      expect(await collection.json()).toEqual({ error: missing });
    }
  });

  it('an empty JSON body where none is needed is no body (clients that send the content type on every request)', async () => {
    const json = { 'content-type': 'application/json' };
    expect(
      (await t.request('/api/v1/rag/collections', { method: 'POST', headers: json, body: '{"name":"emptybody"}' }))
        .status,
    ).toBe(201);
    const deleted = await t.request('/api/v1/rag/collections/emptybody', { method: 'DELETE', headers: json, body: '' });
    expect(deleted.status).toBe(200);
    expect(await deleted.json()).toEqual({ message: 'Collection deleted' });
    expect((await t.request('/api/v1/rag/collections/emptybody')).status).toBe(404);
  });

  it('a missing field is 400 missing_field naming it', async () => {
    const response = await t.request('/api/v1/keys', { method: 'POST', json: { scopes: ['read'] } });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      error: { message: 'name: required', type: 'invalid_request_error', code: 'missing_field', param: 'name' },
    });
  });

  it('a wrong type is 400 invalid_value', async () => {
    const response = await t.request('/api/v1/keys', { method: 'POST', json: { name: 42, scopes: 'read' } });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual(structured('invalid_value'));
  });

  it('a JSON array or scalar body is 400', async () => {
    for (const body of ['[]', '"text"', '12', 'null']) {
      const response = await t.request('/api/v1/keys', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      expect(response.status, body).toBe(400);
    }
  });

  it('prototype pollution attempts are refused', async () => {
    const response = await t.request('/api/v1/keys', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name":"x","scopes":["read"],"__proto__":{"admin":true}}',
    });
    expect(response.status).toBe(400);
  });

  it('a body nested past 100 levels is 400 invalid_json, before any handler sees it', async () => {
    const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    const deep = await t.request('/api/v1/keys', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: `{"name":"x","scopes":["read"],"extra":${nested(9_000)}}`, // under the 64 kB body limit here
    });
    expect(deep.status).toBe(400);
    expect(await deep.json()).toEqual({
      error: {
        message: 'Request body is nested too deeply (more than 100 levels)',
        type: 'invalid_request_error',
        code: 'invalid_json',
      },
    });
    // Brackets inside strings are text, not nesting.
    const text = await t.request('/api/v1/keys', {
      method: 'POST',
      json: { name: 'brackets [{', scopes: ['read'], note: '[{'.repeat(1000) },
    });
    expect(text.status).toBe(201);
  });

  it('text PostgreSQL cannot store (a NUL character) is a 400 wherever it lands', async () => {
    const message = 'Text with a NUL character (\\u0000) cannot be stored or searched; remove it';
    const key = await t.request('/api/v1/keys', { method: 'POST', json: { name: 'a\u0000b', scopes: ['read'] } });
    expect(key.status).toBe(400);
    expect(await key.json()).toEqual({ error: { message, type: 'invalid_request_error', code: 'invalid_value' } });
    const collection = await t.request('/api/v1/rag/collections', {
      method: 'POST',
      json: { name: 'nul', description: 'a\u0000b' },
    });
    expect(collection.status).toBe(400);
    expect(await collection.json()).toEqual({ error: message });
    expect((await t.request('/api/v1/rag/collections/a%00b')).status).toBe(400);
  });

  it('a lone surrogate (a \\uD800 escape) becomes U+FFFD wherever it lands, as in text: never a 500', async () => {
    // Python's json.dumps writes one for a file name read with surrogateescape; jsonb refuses it.
    expect((await t.request('/api/v1/rag/collections', { method: 'POST', json: { name: 'surrogates' } })).status).toBe(
      201,
    );
    const documents = '/api/v1/rag/collections/surrogates/documents';
    const upload = await t.request(documents, {
      method: 'POST',
      json: { name: 'caf\udce9.txt', content: 'one', metadata: { path: 'caf\udce9.txt', 'k\ud800': ['\udfff'] } },
    });
    expect(upload.status).toBe(202);
    const { id } = (await upload.json()) as { id: string };
    const detail = async () =>
      (await (await t.request(`/api/v1/rag/documents/${id}`)).json()) as { name: string; metadata: unknown };
    expect(await detail()).toMatchObject({
      name: 'caf\ufffd.txt',
      metadata: { path: 'caf\ufffd.txt', 'k\ufffd': ['\ufffd'] },
    });
    const update = await t.request(`/api/v1/rag/documents/${id}`, {
      method: 'PUT',
      json: { metadata: { a: '\ud800' } },
    });
    expect(update.status).toBe(200);
    expect((await detail()).metadata).toEqual({ a: '\ufffd' });

    const form = new FormData();
    form.append('file', new Blob(['two'], { type: 'text/plain' }), 'two.txt');
    form.append('metadata', '{"a": "\\ud800"}');
    const multipart = await t.request(documents, { method: 'POST', body: form });
    expect(multipart.status).toBe(202);
    expect(((await multipart.json()) as { metadata: unknown }).metadata).toEqual({ a: '\ufffd' });

    const search = await t.request('/api/v1/agent/tool-calling', {
      method: 'POST',
      json: {
        tool_name: 'rag_search',
        parameters: { query: 'one', collection: 'surrogates', filters: { 'l\ud800': '\ud800' } },
      },
    });
    expect(search.status).toBe(200);
  });

  it('an oversize body is 413', async () => {
    const response = await t.request('/api/v1/keys', {
      method: 'POST',
      json: { name: 'x'.repeat(100 * 1024), scopes: ['read'] },
    });
    expect(response.status).toBe(413);
    expect(await response.json()).toEqual({
      error: {
        type: 'invalid_request_error',
        code: 'payload_too_large',
        message: 'Request body is too large: at most 65,536 bytes',
      },
    });
    // Sent in chunks, without a length: refused as it arrives, with the same message.
    const chunked = await t.request('/api/v1/keys', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: new Blob([`{"name": "${'x'.repeat(100 * 1024)}", "scopes": ["read"]}`]).stream(),
      duplex: 'half',
    });
    expect(chunked.status).toBe(413);
    expect(((await chunked.json()) as { error: { message: string } }).error.message).toBe(
      'Request body is too large: at most 65,536 bytes',
    );
  });

  it('an unsupported content type is 415', async () => {
    const response = await t.request('/api/v1/keys', {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'hello',
    });
    expect(response.status).toBe(415);
    expect(await response.json()).toEqual(structured('unsupported_media_type'));
  });

  it('a compressed body, or one in another charset than UTF-8, is 415 saying so: never read as something else', async () => {
    const collection = '/api/v1/rag/collections';
    const body = JSON.stringify({ name: 'café' });
    // gzip bodies were refused as "not valid JSON", an unknown coding read as plain text.
    for (const coding of ['gzip', 'deflate', 'x-unknown']) {
      const response = await t.request('/api/v1/keys', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-encoding': coding },
        body: coding === 'x-unknown' ? JSON.stringify({ name: 'k', scopes: ['read'] }) : gzipSync(body),
      });
      expect(response.status, coding).toBe(415);
      expect(await response.json()).toEqual({
        error: {
          message: `Content-Encoding '${coding}' is not supported: send the body uncompressed`,
          type: 'invalid_request_error',
          code: 'unsupported_media_type',
        },
      });
    }
    // A latin-1 é was stored as U+FFFD.
    const latin1 = await t.request(collection, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=latin1' },
      body: Buffer.from(body, 'latin1'),
    });
    expect(latin1.status).toBe(415);
    expect(await latin1.json()).toEqual({ error: "charset 'latin1' is not supported: send the body in UTF-8" });
    expect((await t.request(`${collection}/café`)).status).toBe(404);
    // UTF-8, said or not, and identity are read as ever.
    for (const headers of [
      { 'content-type': 'application/json; charset=UTF-8', 'content-encoding': 'identity' },
      { 'content-type': 'application/json; charset="utf-8"' },
    ]) {
      const response = await t.request(collection, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name: `utf8-${Object.keys(headers).length}` }),
      });
      expect(response.status).toBe(201);
    }
  });

  it('a prototype-poisoning key is refused as such, in a JSON body and in multipart metadata alike', async () => {
    const forbidden = 'holds a forbidden key ("__proto__", or "constructor" holding "prototype"); rename it';
    await t.request('/api/v1/rag/collections', { method: 'POST', json: { name: 'poison' } });
    const documents = '/api/v1/rag/collections/poison/documents';
    for (const metadata of ['{"a":{"__proto__":{"x":1}}}', '{"constructor":{"prototype":{"x":1}}}']) {
      // It was "Request body is not valid JSON", though it is.
      const json = await t.request(documents, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: `{"name":"p.txt","content":"x","metadata":${metadata}}`,
      });
      expect(json.status).toBe(400);
      expect(((await json.json()) as { error: string }).error).toBe(`Request body ${forbidden}`);
      // Multipart dropped __proto__ and stored constructor.prototype.
      const form = new FormData();
      form.append('file', new Blob(['x']), 'p.txt');
      form.append('metadata', metadata);
      const multipart = await t.request(documents, { method: 'POST', body: form });
      expect(multipart.status).toBe(400);
      expect(((await multipart.json()) as { error: string }).error).toBe(`metadata: metadata ${forbidden}`);
    }
  });

  it('a multipart field over 1 MB is 413 saying so, not read as the part the parser kept', async () => {
    await t.request('/api/v1/rag/collections', { method: 'POST', json: { name: 'big-fields' } });
    const form = new FormData();
    form.append('file', new Blob(['x']), 'f.txt');
    form.append('metadata', JSON.stringify({ note: 'n'.repeat(1_100_000) }));
    const response = await t.request('/api/v1/rag/collections/big-fields/documents', { method: 'POST', body: form });
    expect(response.status).toBe(413);
    expect(await response.json()).toEqual({ error: "Multipart field 'metadata' is larger than 1048576 bytes" });
  });

  it('an unknown route is 404', async () => {
    const response = await t.request('/api/v1/nope');
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual(structured('not_found', 'not_found_error'));
    expect((await t.request('/elsewhere', { method: 'POST' })).status).toBe(404);
    // Whatever its body: no route would read it.
    for (const headers of [
      { 'content-type': 'application/json' },
      { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    ]) {
      const malformed = await t.request('/api/v1/nope', { method: 'POST', headers, body: '{bad' });
      expect(malformed.status).toBe(404);
    }
  });

  it('a path the router cannot decode is a 400 in the shape of the route it was meant for', async () => {
    const simple = await t.request('/api/v1/rag/documents/%E0%A4%A');
    expect(simple.status).toBe(400);
    expect(await simple.json()).toEqual({ error: 'Malformed URL: a path segment is not valid percent-encoding' });
    const keys = await t.request('/api/v1/keys/%E0%A4%A');
    expect(keys.status).toBe(400);
    expect(await keys.json()).toEqual(structured('invalid_value'));
  });

  it("a path parameter longer than the router's default is judged by the route's schema", async () => {
    const response = await t.request(`/api/v1/rag/documents/${'d'.repeat(150)}`);
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: 'document_id: Too big: expected string to have <=100 characters' });
    const key = await t.request(`/api/v1/keys/${'k'.repeat(5000)}`);
    expect(key.status).toBe(400);
    expect(await key.json()).toEqual(structured('invalid_value'));
  });

  it('authentication comes before body parsing: an unauthenticated bad body is 401', async () => {
    const response = await t.request('/api/v1/keys', {
      key: null,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{oops',
    });
    expect(response.status).toBe(401);
  });

  it('every response carries a request id, and a sane incoming one is kept', async () => {
    const generated = await t.request('/api/v1/keys');
    expect(generated.headers.get('x-request-id')).toMatch(/^req_/);
    const kept = await t.request('/api/v1/keys', { headers: { 'x-request-id': 'trace-123' } });
    expect(kept.headers.get('x-request-id')).toBe('trace-123');
    const replaced = await t.request('/api/v1/keys', { headers: { 'x-request-id': 'bad id\twith spaces' } });
    expect(replaced.headers.get('x-request-id')).toMatch(/^req_/);
  });
});

describe('logs', () => {
  it('one line per request with id, key id, status and duration; never the secret', async () => {
    const k = await t.createKey({ name: 'logged', scopes: ['admin'] });
    await t.request('/api/v1/keys', { key: k.key, headers: { 'x-request-id': 'log-check-1' } });
    await t.request('/api/v1/keys', { key: `${k.key}x`, headers: { 'x-request-id': 'log-check-2' } });
    const lines = t.logs.filter((l) => l.request_id === 'log-check-1');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ msg: 'request', status: 200, key_id: k.id, method: 'GET', url: '/api/v1/keys' });
    expect(typeof lines[0]?.duration_ms).toBe('number');
    expect(t.logs.filter((l) => l.request_id === 'log-check-2')[0]).toMatchObject({ status: 401 });
    expect(t.rawLogs()).not.toContain(k.key);
    expect(t.rawLogs()).not.toContain(t.adminKey);
  });
  it('a secret put in the query string is not logged; other parameters are', async () => {
    const k = await t.createKey({ name: 'in-url', scopes: ['read'] });
    const query = `?page=2&api_key=${k.key}&access_token=${k.key}x&X-Api-Key=${k.key}y&token=${k.key}z`;
    await t.request(`/api/v1/rag/collections${query}`, { key: null, headers: { 'x-request-id': 'log-check-3' } });
    const [line] = t.logs.filter((l) => l.request_id === 'log-check-3');
    expect(line).toMatchObject({
      status: 401,
      url: '/api/v1/rag/collections?page=2&api_key=[redacted]&access_token=[redacted]&X-Api-Key=[redacted]&token=[redacted]',
    });
    expect(t.rawLogs()).not.toContain(k.key);
  });
});

/** Sends raw bytes and returns everything the server answered before closing the connection. */
function rawExchange(request: string): Promise<string> {
  const { port } = new URL(t.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(request));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (piece: string) => (answer += piece));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}

describe('a client that leaves', () => {
  it('mid-body is logged as a disconnect, not as a failure of the server (nor of its database)', async () => {
    const { port } = new URL(t.url);
    const before = t.logs.length;
    for (const path of ['/api/v1/keys', '/api/v1/rag/collections']) {
      await new Promise<void>((resolve) => {
        const socket = connect(Number(port), '127.0.0.1', () => {
          socket.write(
            `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.adminKey}\r\n` +
              'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":',
          );
          setTimeout(() => socket.destroy(), 100);
        });
        socket.on('close', () => resolve());
      });
    }
    const lines = () => t.logs.slice(before);
    await until(
      'the disconnects logged',
      () => (lines().filter((l) => l.msg === 'client disconnected before the answer').length >= 2 ? true : undefined),
      { timeoutMs: 10_000, detail: () => JSON.stringify(lines()) },
    );
    // It was an error with a stack, answered as "Database unavailable" (ECONNRESET).
    expect(lines().filter((l) => (l.level as number) >= 50)).toEqual([]);
    expect(JSON.stringify(lines())).not.toMatch(/Database unavailable/);
  });
});

describe('what the HTTP parser refuses before any route runs', () => {
  const huge = `X-Padding: ${'a'.repeat(20_000)}\r\n`;
  const bodyOf = (answer: string) => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as unknown;

  it("headers over Node's 16 KB: 431 in the shape of the route the request line names", async () => {
    const structuredAnswer = await rawExchange(`GET /api/v1/models HTTP/1.1\r\nHost: x\r\n${huge}\r\n`);
    expect(structuredAnswer).toMatch(/^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
    expect(structuredAnswer).toMatch(/\r\nContent-Type: application\/json; charset=utf-8\r\n/);
    expect(bodyOf(structuredAnswer)).toEqual({
      error: {
        message: 'Request header fields too large (16 KB at most)',
        type: 'invalid_request_error',
        code: 'headers_too_large',
      },
    });
    const simple = await rawExchange(`GET /api/v1/rag/collections/abc HTTP/1.1\r\nHost: x\r\n${huge}\r\n`);
    expect(simple).toMatch(/^HTTP\/1\.1 431 /);
    expect(bodyOf(simple)).toEqual({ error: 'Request header fields too large (16 KB at most)' });
  });

  it('a request line that is not HTTP: 400 in the structured shape', async () => {
    const answer = await rawExchange('HELLO\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(bodyOf(answer)).toEqual({
      error: { message: 'Malformed HTTP request', type: 'invalid_request_error', code: 'invalid_value' },
    });
  });
});
