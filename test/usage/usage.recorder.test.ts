import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createBatchedUsageRecorder } from '../../src/usage/usage.recorder.ts';
import type { UsageDelta } from '../../src/usage/usage.repository.ts';

/** A repository double that fails on demand: a database outage is outside the recorder's control. */
function flakyRepo() {
  const written: UsageDelta[][] = [];
  let failures = 0;
  return {
    written,
    failNext(n: number) {
      failures = n;
    },
    async add(deltas: readonly UsageDelta[]) {
      if (failures > 0) {
        failures--;
        throw new Error('database unavailable');
      }
      written.push(deltas.map((d) => ({ ...d })));
    },
  };
}

const logger = pino({ level: 'silent' });
const day = Date.UTC(2026, 10, 22, 12);

/** A recorder whose timer never fires during a test: only explicit, size and close flushes write. */
const recorderOver = (repo: ReturnType<typeof flakyRepo>, maxPendingRows = 100, clock = () => day) =>
  createBatchedUsageRecorder({ repo, clock, logger, flushIntervalMs: 3_600_000, maxPendingRows });

describe('batched usage recorder', () => {
  it('aggregates per key, day and model, and writes one batch per flush', async () => {
    const repo = flakyRepo();
    let now = day;
    const recorder = recorderOver(repo, 100, () => now);
    recorder.record({ keyId: 'k1', model: 'm', promptTokens: 3, completionTokens: 4 });
    recorder.record({ keyId: 'k1', model: 'm', promptTokens: 1, completionTokens: 1 });
    recorder.record({ keyId: 'k2', model: 'm', promptTokens: 5, completionTokens: 0 });
    now += 86_400_000;
    recorder.record({ keyId: 'k1', model: 'm', promptTokens: 2, completionTokens: 2 });
    expect(recorder.tokensPending('k1')).toBe(13);
    await recorder.flush();
    expect(repo.written).toEqual([
      [
        { keyId: 'k1', day: '2026-11-22', model: 'm', requests: 2, promptTokens: 4, completionTokens: 5 },
        { keyId: 'k2', day: '2026-11-22', model: 'm', requests: 1, promptTokens: 5, completionTokens: 0 },
        { keyId: 'k1', day: '2026-11-23', model: 'm', requests: 1, promptTokens: 2, completionTokens: 2 },
      ],
    ]);
    expect(recorder.tokensPending('k1')).toBe(0);
    expect(recorder.tokensRecorded('k1')).toBe(13);
    await recorder.close();
  });

  it('keeps the counts of a failed write and writes them with the next one', async () => {
    const repo = flakyRepo();
    const recorder = recorderOver(repo, 100);
    recorder.record({ keyId: 'k', model: 'm', promptTokens: 1, completionTokens: 1 });
    repo.failNext(1);
    await expect(recorder.flush()).rejects.toThrow('database unavailable');
    recorder.record({ keyId: 'k', model: 'm', promptTokens: 10, completionTokens: 10 });
    expect(recorder.tokensPending('k')).toBe(22);
    await recorder.flush();
    expect(repo.written).toEqual([
      [{ keyId: 'k', day: '2026-11-22', model: 'm', requests: 2, promptTokens: 11, completionTokens: 11 }],
    ]);
    await recorder.close();
  });

  it('writes at once when enough rows wait, and retries at close until the write succeeds', async () => {
    const repo = flakyRepo();
    const recorder = recorderOver(repo, 2);
    recorder.record({ keyId: 'a', model: 'm', promptTokens: 1, completionTokens: 0 });
    recorder.record({ keyId: 'b', model: 'm', promptTokens: 1, completionTokens: 0 });
    await expect.poll(() => repo.written.length).toBe(1);

    recorder.record({ keyId: 'c', model: 'm', promptTokens: 1, completionTokens: 0 });
    repo.failNext(2);
    await recorder.close();
    expect(repo.written[1]).toEqual([
      { keyId: 'c', day: '2026-11-22', model: 'm', requests: 1, promptTokens: 1, completionTokens: 0 },
    ]);
  });
});
