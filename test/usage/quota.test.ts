import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.ts';
import { checkTokenQuota, createTokenQuota } from '../../src/usage/quota.ts';

/** A quota that has seen `used` tokens this month, and counts its reads. */
function quotaAt(used: number) {
  let reads = 0;
  return {
    reads: () => reads,
    tokensThisMonth: async () => {
      reads += 1;
      return used;
    },
  };
}

describe('checkTokenQuota', () => {
  it('a key without a token quota is never refused, and costs no read', async () => {
    const quota = quotaAt(1_000_000);
    await expect(checkTokenQuota(quota, 'key_a', null)).resolves.toBeUndefined();
    expect(quota.reads()).toBe(0);
  });

  it('serves below the quota and refuses at it, with the message chat gives', async () => {
    await expect(checkTokenQuota(quotaAt(9), 'key_a', 10)).resolves.toBeUndefined();
    const refusal = checkTokenQuota(quotaAt(10), 'key_a', 10);
    await expect(refusal).rejects.toBeInstanceOf(AppError);
    await expect(refusal).rejects.toMatchObject({
      code: 'quota_exceeded',
      message: 'Monthly token quota of this API key exceeded (10 of 10)',
    });
  });
});

/** A quota over a recorder double: `calls` calls of `tokens` recorded here, `stored` in the database. */
function inFlightQuota(opts: { calls?: number; tokens?: number; stored?: { tokens: number; requests: number } }) {
  let now = Date.UTC(2026, 10, 22, 12);
  const quota = createTokenQuota({
    // The database holds what this process recorded (flushed) plus `stored` from earlier ones.
    repo: {
      usageSince: async () => ({
        tokens: (opts.calls ?? 0) * (opts.tokens ?? 0) + (opts.stored?.tokens ?? 0),
        requests: (opts.calls ?? 0) + (opts.stored?.requests ?? 0),
      }),
    },
    recorder: {
      tokensRecorded: () => (opts.calls ?? 0) * (opts.tokens ?? 0),
      callsRecorded: () => opts.calls ?? 0,
      tokensPending: () => 0,
    },
    clock: () => now,
    ttlMs: 5_000,
  });
  return { quota, advance: (ms: number) => (now += ms) };
}

describe('calls in flight', () => {
  it("reserve the key's mean call size: admitted until they would reach the quota, again once one ends", async () => {
    const { quota } = inFlightQuota({ calls: 2, tokens: 10 }); // 20 used, 10 a call
    const held = [];
    for (let i = 0; i < 8; i++) held.push(await quota.admitCall('key_a', 100));
    await expect(quota.admitCall('key_a', 100)).rejects.toMatchObject({
      code: 'quota_exceeded',
      message:
        'Monthly token quota of this API key would be exceeded by the calls in flight (20 of 100 used, 8 call(s) holding about 80 tokens running, this one about 10)',
    });
    held.pop()?.();
    held.push(await quota.admitCall('key_a', 100));
    // Another key is not touched by these.
    await expect(quota.admitCall('key_b', 100)).resolves.toBeTypeOf('function');
  });

  it('a call alone is admitted below the quota, however large calls are', async () => {
    const { quota } = inFlightQuota({ calls: 1, tokens: 90 });
    const release = await quota.admitCall('key_a', 100);
    await expect(quota.admitCall('key_a', 100)).rejects.toMatchObject({ code: 'quota_exceeded' });
    release();
    await expect(quota.admitCall('key_a', 100)).resolves.toBeTypeOf('function');
  });

  it("take the month's mean from the database before this process saw a call; none known, none reserved", async () => {
    const known = inFlightQuota({ stored: { tokens: 40, requests: 4 } }).quota; // 40 used, 10 a call
    for (let i = 0; i < 6; i++) await known.admitCall('key_a', 100);
    await expect(known.admitCall('key_a', 100)).rejects.toMatchObject({ code: 'quota_exceeded' });
    const fresh = inFlightQuota({}).quota;
    for (let i = 0; i < 50; i++) await fresh.admitCall('key_a', 100);
  });

  it("hold what the caller expects of the call when it is more than the mean: a fresh key's concurrent calls too", async () => {
    // Before, a key with no call seen reserved nothing: 20 concurrent chat calls of 30 tokens ran
    // for a quota of 100, and ten /embeddings calls of 200 tokens for a quota of 100.
    const fresh = inFlightQuota({}).quota;
    const first = await fresh.admitCall('key_a', 100, 60);
    await expect(fresh.admitCall('key_a', 100, 60)).rejects.toMatchObject({
      code: 'quota_exceeded',
      message:
        'Monthly token quota of this API key would be exceeded by the calls in flight (0 of 100 used, 1 call(s) holding about 60 tokens running, this one about 60)',
    });
    await fresh.admitCall('key_a', 100, 40);
    await expect(fresh.admitCall('key_a', 100, 1)).rejects.toMatchObject({ code: 'quota_exceeded' });
    first();
    await expect(fresh.admitCall('key_a', 100, 60)).resolves.toBeTypeOf('function');
    // The mean wins when it is larger.
    const known = inFlightQuota({ calls: 1, tokens: 50 }).quota;
    await known.admitCall('key_a', 180, 1);
    await known.admitCall('key_a', 180, 1);
    await expect(known.admitCall('key_a', 180, 1)).rejects.toMatchObject({ code: 'quota_exceeded' });
  });

  it('a reservation never released stops counting after 10 minutes', async () => {
    const { quota, advance } = inFlightQuota({ calls: 1, tokens: 50 });
    await quota.admitCall('key_a', 100); // 50 used, one of 50 running: a second would reach 150
    await expect(quota.admitCall('key_a', 100)).rejects.toMatchObject({ code: 'quota_exceeded' });
    advance(10 * 60_000);
    await expect(quota.admitCall('key_a', 100)).resolves.toBeTypeOf('function');
  });
});
