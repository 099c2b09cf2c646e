import { parse as parseTolerant } from 'jsonc-parser';
import type { ParseError as JsoncError } from 'jsonc-parser';
import { decodeText } from './decode.ts';
import { ParseError, messageOf } from './errors.ts';
import { TextSink } from './text-sink.ts';
import type { ParsedDocument, ParseLimits } from './types.ts';

/** Real data rarely nests past a dozen levels; hostile input nests a million. */
export const maxJsonDepth = 100;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function parseJson(text: string, what: string): Json {
  try {
    return JSON.parse(text) as Json;
  } catch (error) {
    throw new ParseError(`${what} is not valid JSON: ${withPosition(messageOf(error), text)}`, { cause: error });
  }
}

/**
 * V8 says where most syntax errors are ("… in JSON at position 12 (line 2 column 3)") but not
 * for an unexpected token; then VS Code's JSON scanner (jsonc-parser) is asked for the offset.
 */
function withPosition(message: string, text: string): string {
  if (/position \d+/.test(message)) return message;
  const errors: JsoncError[] = [];
  try {
    parseTolerant(text, errors, { disallowComments: true, allowTrailingComma: false });
  } catch {
    return message; // its recursive descent can run out of stack on absurd nesting
  }
  const offset = errors[0]?.offset;
  if (offset === undefined) return message;
  const before = text.slice(0, offset).split('\n');
  const column = (before.at(-1)?.length ?? 0) + 1;
  return `${message.replace(/, ".*$/s, '')} at position ${offset} (line ${before.length} column ${column})`;
}

const scalar = (value: Json): string => (typeof value === 'string' ? value : JSON.stringify(value));

/**
 * Flattens a value to "path: value" lines (`order.items[0].sku: A-1`), which keeps each value
 * next to the keys that give it meaning — what a search for the value needs.
 */
function render(value: Json, path: string, depth: number, out: string[]): void {
  if (depth > maxJsonDepth) throw new ParseError(`JSON is nested too deeply (more than ${maxJsonDepth} levels)`);
  if (Array.isArray(value)) {
    if (value.length === 0) out.push(`${path}: []`);
    value.forEach((item, i) => render(item, `${path}[${i}]`, depth + 1, out));
  } else if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value);
    if (entries.length === 0) out.push(`${path}: {}`);
    for (const [key, item] of entries) render(item, path === '' ? key : `${path}.${key}`, depth + 1, out);
  } else {
    out.push(path === '' ? scalar(value) : `${path}: ${scalar(value)}`);
  }
}

const renderLines = (value: Json, path: string): string => {
  const lines: string[] = [];
  render(value, path, 0, lines);
  return lines.join('\n');
};

/**
 * A JSON document: a top-level array gives one paragraph per element, an object one paragraph
 * per top-level key, so records stay whole when the chunker splits on paragraphs.
 */
export function parseJsonDocument(bytes: Uint8Array, limits?: ParseLimits): ParsedDocument {
  const value = parseJson(decodeText(bytes), 'The file');
  const sink = new TextSink(limits);
  if (Array.isArray(value)) {
    value.every((item, i) => sink.add(renderLines(item, `[${i}]`)));
  } else if (value !== null && typeof value === 'object') {
    Object.entries(value).every(([key, item]) => sink.add(renderLines(item, key)));
  } else {
    sink.add(renderLines(value, ''));
  }
  return sink.result();
}

/** JSON Lines: one paragraph per record; a bad line names its line number. */
export function parseJsonLines(bytes: Uint8Array, limits?: ParseLimits): ParsedDocument {
  const sink = new TextSink(limits);
  let records = 0;
  const lines = decodeText(bytes).split(/\r?\n/);
  for (const [i, line] of lines.entries()) {
    if (line.trim() === '') continue;
    records += 1;
    if (!sink.add(renderLines(parseJson(line, `Line ${i + 1}`), ''))) break;
  }
  return sink.result({ records });
}
