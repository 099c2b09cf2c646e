import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { toAppError } from '../../src/http/error-handler.ts';
import { statusOf } from '../../src/http/errors.ts';

/** What drizzle throws: its own error, with the server's error as its cause. */
function failedQuery(code: string, message: string): Error {
  const server = new pg.DatabaseError(message, message.length, 'error');
  server.code = code;
  return new Error('Failed query: insert into chunks …', { cause: server });
}

describe('database errors a request can meet', () => {
  it('a full disk is 503 saying so: nothing was written, retry once space is freed', () => {
    const error = toAppError(failedQuery('53100', 'could not extend file "base/16384/16500": No space left on device'));
    expect(statusOf(error)).toBe(503);
    expect(error.message).toBe('The database is out of disk space: nothing was written; retry once space is freed');
  });

  it('the database gone, renamed, or out of connections or memory is 503 "retry shortly", not 500', () => {
    for (const code of ['3D000', '57P04', '53000', '53200', '53300', '53400', '57P01', '08006']) {
      const error = toAppError(failedQuery(code, 'server says no'));
      expect(statusOf(error), code).toBe(503);
      expect(error.message, code).toBe('Database unavailable, retry shortly');
    }
  });

  it('other database errors stay 500: they are bugs, not outages', () => {
    const error = toAppError(failedQuery('42P01', 'relation "nope" does not exist'));
    expect(statusOf(error)).toBe(500);
  });
});
