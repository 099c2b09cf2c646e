import { parse } from 'csv-parse/sync';
import { decodeText } from './decode.ts';
import { ParseError, messageOf } from './errors.ts';
import { normaliseInline, TextSink } from './text-sink.ts';
import type { ParsedDocument, ParseLimits } from './types.ts';

/** Spreadsheet exports rarely stack more than three header rows; more is data. */
const maxHeaderRows = 3;

const isNumeric = (cell: string): boolean => /^[-+]?[\d.,]+%?$/.test(cell);

/**
 * A row under the first one still belongs to the header when it labels a group spanned by the
 * row above (merged cells export as empty cells): its first cell is empty, some cells are empty,
 * and none is a number.
 */
const continuesHeader = (row: readonly string[]): boolean =>
  row[0] === '' && row.some((cell) => cell === '') && row.some((cell) => cell !== '') && !row.some(isNumeric);

/**
 * Column names from stacked header rows: a label spanning several columns (written once, then
 * empty cells) is carried right over the columns that have a sub-label, giving
 * "Results / Accuracy" and "Results / Time to complete".
 */
export function columnNames(headerRows: readonly (readonly string[])[], width: number): string[] {
  const filled = headerRows.map((row, r) => {
    const below = headerRows.slice(r + 1);
    let carried = '';
    return Array.from({ length: width }, (_, c) => {
      const cell = row[c] ?? '';
      if (cell !== '') carried = cell;
      else if (!below.some((lower) => (lower[c] ?? '') !== '')) carried = '';
      return cell !== '' ? cell : carried;
    });
  });
  return Array.from({ length: width }, (_, c) => {
    const parts = filled.map((row) => row[c] ?? '').filter((part, i, all) => part !== '' && part !== all[i - 1]);
    return parts.length > 0 ? parts.join(' / ') : `column ${c + 1}`;
  });
}

/**
 * CSV with csv-parse (the node-csv project): RFC 4180 quoting, embedded newlines, ragged rows.
 * Each data row becomes one paragraph of "header: value" lines, so a row is found by any of its
 * values and still says what each value means.
 */
export function parseCsv(bytes: Uint8Array, limits?: ParseLimits): ParsedDocument {
  const text = decodeText(bytes);
  let rows: string[][];
  try {
    rows = parse(text, {
      bom: true,
      relax_column_count: true,
      relax_quotes: true,
      skip_empty_lines: true,
      trim: true,
      // Tab- and semicolon-separated exports are common; csv-parse picks the first that splits.
      delimiter: [',', '\t', ';'],
    });
  } catch (error) {
    throw new ParseError(`CSV could not be read: ${messageOf(error)}`, { cause: error });
  }
  const cleaned = rows.map((row) => row.map(normaliseInline));
  const width = Math.max(0, ...cleaned.map((row) => row.length));
  let headerCount = cleaned.length > 1 ? 1 : 0;
  while (
    headerCount < maxHeaderRows &&
    headerCount < cleaned.length - 1 &&
    continuesHeader(cleaned[headerCount] ?? [])
  ) {
    headerCount += 1;
  }
  const names = columnNames(cleaned.slice(0, headerCount), width);
  const sink = new TextSink(limits);
  for (const row of cleaned.slice(headerCount)) {
    const pairs = row.flatMap((value, c) => (value === '' ? [] : [`${names[c] ?? `column ${c + 1}`}: ${value}`]));
    if (!sink.add(pairs.join('\n'))) break;
  }
  return sink.result({ rows: cleaned.length - headerCount, columns: width, headerRows: headerCount });
}
