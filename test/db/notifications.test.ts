import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { listen, type Listener } from '../../src/db/notifications.ts';
import { openTestDatabase, type TestDatabase } from '../support/database.ts';

/**
 * The LISTEN connection also carries statements (the API-key change acknowledgements and the
 * count of listening instances): one at a time, since pg deprecates a statement sent while
 * another runs on the same client (two key rotations at once warned, and crashed a server run
 * with --throw-deprecation).
 */
describe.skipIf(!process.env.TEST_DATABASE_URL)('statements on the listening connection', () => {
  let t: TestDatabase;
  let listener: Listener;
  beforeAll(async () => {
    t = await openTestDatabase();
    listener = await listen({
      url: t.url as string,
      channels: ['ragport_test_channel'],
      name: 'ragport-test-listener',
      onMessage: () => undefined,
      onGap: () => undefined,
      onError: () => undefined,
    });
  });
  afterAll(async () => {
    await listener.close();
    await t.close();
  });

  it('run one at a time, in the order sent, each with its own answer', async () => {
    let inFlight = 0;
    let most = 0;
    // The method as pg defines it, called with each client as `this` below.
    const query = Object.getOwnPropertyDescriptor(pg.Client.prototype, 'query')?.value as (...a: unknown[]) => unknown;
    const spy = vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (
      this: pg.Client,
      ...args: unknown[]
    ) {
      inFlight++;
      most = Math.max(most, inFlight);
      const result = query.apply(this, args);
      const done = () => {
        inFlight--;
      };
      Promise.resolve(result).then(done, done);
      return result as never;
    });
    try {
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          listener.query<{ n: number }>('select $1::int as n, pg_sleep(0.01)', [i]).then((rows) => rows[0]?.n),
        ),
      );
      expect(answers).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      expect(most).toBe(1);
      // A failing statement does not stop the ones after it.
      const [failed, after] = await Promise.allSettled([
        listener.query('select 1/0'),
        listener.query<{ ok: boolean }>('select true as ok'),
      ]);
      expect(failed.status).toBe('rejected');
      expect(after).toEqual({ status: 'fulfilled', value: [{ ok: true }] });
    } finally {
      spy.mockRestore();
    }
  });
});
