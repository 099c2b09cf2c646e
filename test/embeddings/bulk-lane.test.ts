/**
 * The bulk lane's queue (src/embeddings/bulk-lane.ts), with model threads whose pieces the test
 * finishes by hand: which texts a thread holds, and when. The real threads are in threads.test.ts.
 * Before it, calls ran as batches one after another: with documents of two or three chunks one
 * thread waited for the other's last text at the end of every batch, and both for the event loop
 * between two texts.
 */
import { describe, expect, it } from 'vitest';
import { createBulkLane, type LaneThread } from '../../src/embeddings/bulk-lane.ts';

interface Piece {
  texts: string[];
  done(): void;
  fail(error: Error): void;
}

/** A thread that embeds a text as [its length] once the test says so. */
function handThread() {
  const pieces: Piece[] = [];
  const thread: LaneThread = {
    embed: (texts) =>
      new Promise((resolve, reject) =>
        pieces.push({
          texts,
          done: () =>
            resolve({ vectors: texts.map((t) => Float32Array.of(t.length)), tokenCounts: texts.map((t) => t.length) }),
          fail: reject,
        }),
      ),
  };
  return { thread, pieces, texts: () => pieces.map((p) => p.texts.join('+')) };
}

const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('the bulk lane', () => {
  it('gives every thread a text to run and one to hold, and starts the next call before the last one ends', async () => {
    const lane = createBulkLane({ batching: 'alone', piece: 1 });
    const a = handThread();
    const b = handThread();
    const threads = [a.thread, b.thread];
    const first = lane.run(threads, ['a0', 'a1', 'a22']);
    const second = lane.run(threads, ['b0', 'b11']);
    await settled();
    // Breadth first, two each: the second call's first text is already on a thread.
    expect(a.texts()).toEqual(['a0', 'a22']);
    expect(b.texts()).toEqual(['a1', 'b0']);

    a.pieces[0]?.done();
    await settled();
    expect(a.texts()).toEqual(['a0', 'a22', 'b11']);
    b.pieces[0]?.done();
    b.pieces[1]?.done(); // b0 ends while a22 is still running
    await settled();
    a.pieces[1]?.done();
    a.pieces[2]?.done();

    expect(await first).toEqual({ vectors: [[2], [2], [3]].map((v) => Float32Array.from(v)), promptTokens: 7 });
    expect(await second).toEqual({ vectors: [[2], [3]].map((v) => Float32Array.from(v)), promptTokens: 5 });
  });

  it('takes pieces of several texts in the order they came', async () => {
    const lane = createBulkLane({ batching: 'padded', piece: 3, depth: 1 });
    const a = handThread();
    const result = lane.run([a.thread], ['x', 'yy', 'zzz', 'wwww']);
    await settled();
    expect(a.texts()).toEqual(['x+yy+zzz']);
    a.pieces[0]?.done();
    await settled();
    expect(a.texts()).toEqual(['x+yy+zzz', 'wwww']);
    a.pieces[1]?.done();
    expect((await result).vectors.map((v) => v[0])).toEqual([1, 2, 3, 4]);
  });

  it('shares a padded batch among the threads when fewer texts than a piece are queued', async () => {
    const lane = createBulkLane({ batching: 'padded', piece: 16, depth: 1 });
    const a = handThread();
    const b = handThread();
    const result = lane.run([a.thread, b.thread], ['x', 'yy', 'zzz']);
    await settled();
    expect([a.texts(), b.texts()]).toEqual([['x+yy'], ['zzz']]);
    a.pieces[0]?.done();
    b.pieces[0]?.done();
    expect((await result).vectors.map((v) => v[0])).toEqual([1, 2, 3]);
  });

  it('keeps going through a long stream of calls, each answered with its own vectors', async () => {
    const lane = createBulkLane({ batching: 'alone', piece: 1 });
    const instant: LaneThread = {
      embed: (texts) =>
        Promise.resolve({ vectors: texts.map((t) => Float32Array.of(t.length)), tokenCounts: texts.map(() => 1) }),
    };
    const calls = Array.from({ length: 3_000 }, (_, i) => lane.run([instant, instant], ['a'.repeat(i % 7), 'b']));
    const results = await Promise.all(calls);
    results.forEach((r, i) => expect(r.vectors.map((v) => v[0])).toEqual([i % 7, 1]));
  });

  it('rejects an aborted call at once and never sends its queued texts', async () => {
    const lane = createBulkLane({ batching: 'alone', piece: 1, depth: 1 });
    const a = handThread();
    const first = lane.run([a.thread], ['a0']);
    const controller = new AbortController();
    const cancelled = lane.run([a.thread], ['c0', 'c1'], controller.signal);
    const third = lane.run([a.thread], ['t0']);
    controller.abort(new Error('stopped'));
    await expect(cancelled).rejects.toThrow('stopped');
    a.pieces[0]?.done();
    await settled();
    a.pieces[1]?.done();
    await expect(first).resolves.toMatchObject({ promptTokens: 2 });
    await expect(third).resolves.toMatchObject({ promptTokens: 2 });
    expect(a.texts()).toEqual(['a0', 't0']);
    await expect(lane.run([a.thread], ['late'], controller.signal)).rejects.toThrow('stopped');
  });

  it('a failed piece fails the calls it held, and the lane goes on', async () => {
    const lane = createBulkLane({ batching: 'alone', piece: 1, depth: 1 });
    const a = handThread();
    const b = handThread();
    const threads = [a.thread, b.thread];
    const broken = lane.run(threads, ['x0', 'x1', 'x2']);
    const later = lane.run(threads, ['y0']);
    await settled();
    a.pieces[0]?.fail(new Error('model thread exited'));
    await expect(broken).rejects.toThrow('model thread exited');
    await settled();
    // x2 belongs to a failed call: it is skipped, and the next call's text takes its place.
    expect(a.texts()).toEqual(['x0', 'y0']);
    a.pieces[1]?.done();
    b.pieces[0]?.done();
    await expect(later).resolves.toMatchObject({ promptTokens: 2 });
  });

  it('answers an empty call at once', async () => {
    const lane = createBulkLane({ batching: 'alone', piece: 1 });
    await expect(lane.run([handThread().thread], [])).resolves.toEqual({ vectors: [], promptTokens: 0 });
  });
});
