/** Work split into short transactions, each sized from the last one's time per row. */
export interface Slicing {
  /** About how long one transaction may take. */
  sliceMs: number;
  /** Rows of a table's first slice. */
  firstRows: number;
  /** Most rows of any slice. */
  maxRows: number;
}

/** The next slice's rows: as many as took about `sliceMs` in the last one, at most four times as many. */
function nextSliceRows(slicing: Slicing, rows: number, deleted: number, ms: number): number {
  if (deleted < rows) return rows;
  const perRow = Math.max(ms, 0.1) / deleted;
  return Math.max(1, Math.min(slicing.maxRows, Math.round(slicing.sliceMs / perRow), rows * 4));
}

/**
 * The work's result and how long it ran. Called inside the slice's transaction, so that the time
 * excludes waiting for the database: on the embedded one a background slice waits behind every
 * request's statements, and sizing slices by that wait shrank them to one row each (a document of
 * 3,106 chunks then took 45 s to delete).
 */
export async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: performance.now() - started };
}

/**
 * Runs `slice` with a row count sized from the last one's own time, until one removes nothing;
 * the rows in all. Each slice returns how many rows it took and how long it ran (`timed`).
 */
export async function inSlices(
  slicing: Slicing,
  slice: (rows: number) => Promise<{ value: number; ms: number }>,
): Promise<number> {
  let rows = slicing.firstRows;
  let total = 0;
  for (;;) {
    const { value, ms } = await slice(rows);
    if (value === 0) return total;
    total += value;
    rows = nextSliceRows(slicing, rows, value, ms);
  }
}
