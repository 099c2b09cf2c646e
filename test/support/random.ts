/**
 * Deterministic pseudo-random numbers (mulberry32: 32-bit state, full period 2^32), so tests and
 * benchmarks build the same synthetic data on every run. A naive `seed * a + c mod 2^31` in
 * doubles loses precision above 2^53 and falls into short cycles, which silently duplicates rows.
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** A standard normal variate (Box–Muller) from a uniform source. */
export function gaussian(rand: () => number): number {
  return Math.sqrt(-2 * Math.log(rand() + 1e-12)) * Math.cos(2 * Math.PI * rand());
}
