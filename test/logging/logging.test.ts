import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, maxLogLineBytes } from '../../src/logging.ts';

/** A logger as the server builds it, writing into an array of lines. */
function capture() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line !== '') lines.push(line);
      done();
    },
  });
  return { logger: createLogger('info', sink), lines };
}

// Issue 13, finding 7: a failed query was logged with its whole SQL text and every parameter.
class FailedQuery extends Error {
  readonly query: string;
  readonly params: unknown[];
  constructor(query: string, params: unknown[]) {
    super(`Failed query: ${query}\nparams: ${params.join(',')}`);
    this.query = query;
    this.params = params;
  }
}

describe('log lines', () => {
  it('a failed query with a huge SQL text and 70,000 parameters logs a short line', () => {
    const { logger, lines } = capture();
    const params = Array.from({ length: 70_000 }, (_, i) => i);
    const query = `select 1 where x in (${params.map((_, i) => `$${i + 1}`).join(', ')})`;
    logger.error({ err: new FailedQuery(query, params) }, 'request failed');
    expect(lines).toHaveLength(1);
    const line = lines[0] as string;
    expect(Buffer.byteLength(line)).toBeLessThanOrEqual(maxLogLineBytes);
    const parsed = JSON.parse(line) as { msg: string; err: { params: string; query: string; message: string } };
    expect(parsed.msg).toBe('request failed');
    expect(parsed.err.params).toBe('[70000 parameters]');
    expect(parsed.err.query).toMatch(/more characters\]$/);
  });

  it("a failed query's cause is said in a field of its own, whatever the length of its SQL", () => {
    const { logger, lines } = capture();
    const query = `select ${'x, '.repeat(3_000)}1`;
    const cause = Object.assign(new Error('canceling statement due to user request'), { code: '57014' });
    const failed = new FailedQuery(query, [1]);
    Object.defineProperty(failed, 'cause', { value: cause });
    logger.error({ err: failed }, 'request failed');
    const parsed = JSON.parse(lines[0] as string) as { err: { message: string; cause: unknown } };
    // The message is the SQL first, cut to size: the database's message is not in it.
    expect(parsed.err.message).not.toContain('canceling statement');
    expect(parsed.err.cause).toEqual({
      type: 'Error',
      message: 'canceling statement due to user request',
      code: '57014',
    });
  });

  it('no line is longer than the cap, whatever is logged', () => {
    const { logger, lines } = capture();
    const wide = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`field${i}`, 'v'.repeat(100)]));
    logger.warn(wide, 'x'.repeat(50_000));
    expect(lines).toHaveLength(1);
    const line = lines[0] as string;
    expect(Buffer.byteLength(line)).toBeLessThanOrEqual(maxLogLineBytes);
    const parsed = JSON.parse(line) as { level: number; truncated: boolean; original_bytes: number };
    expect(parsed.level).toBe(40);
    expect(parsed.truncated).toBe(true);
    expect(parsed.original_bytes).toBeGreaterThan(maxLogLineBytes);
  });

  it('secrets stay redacted', () => {
    const { logger, lines } = capture();
    logger.info({ authorization: 'Bearer sk-live-secret', nested: { apiKey: 'sk-x' } }, 'hello');
    expect(lines[0]).not.toContain('sk-live-secret');
    expect(lines[0]).not.toContain('sk-x');
  });
});
