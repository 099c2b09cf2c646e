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
export function nextSliceRows(slicing: Slicing, rows: number, deleted: number, ms: number): number {
  if (deleted < rows) return rows;
  const perRow = Math.max(ms, 0.1) / deleted;
  return Math.max(1, Math.min(slicing.maxRows, Math.round(slicing.sliceMs / perRow), rows * 4));
}
