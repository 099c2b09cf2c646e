/** A settable clock, starting at a random UTC midnight in the future so runs never share windows. */
export function fakeClock() {
  const day = 86_400_000;
  let now = Date.UTC(2031, 0, 1) + Math.floor(Math.random() * 100_000) * day;
  const clock = () => now;
  return Object.assign(clock, {
    set: (ms: number) => {
      now = ms;
    },
    advance: (ms: number) => {
      now += ms;
    },
  });
}
export type FakeClock = ReturnType<typeof fakeClock>;
