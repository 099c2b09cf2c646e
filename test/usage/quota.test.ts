import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.ts';
import { checkTokenQuota } from '../../src/usage/quota.ts';

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
