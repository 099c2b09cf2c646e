/** Milliseconds since the epoch; injected so tests can move time (test/support/clock.ts). */
export type Clock = () => number;
