import { normaliseInline } from './text-sink.ts';

/** What layout needs of a pdfjs text item (`TextItem`), with the transform already unpacked. */
export interface PositionedText {
  str: string;
  x: number;
  y: number;
  width: number;
  height: number;
  hasEOL: boolean;
}

interface Line {
  text: string;
  y: number;
  height: number;
}

/**
 * Groups text items into lines by baseline. Superscripts (footnote marks) sit a few points above
 * the baseline, so a line only breaks when the baseline moves by more than 60% of the font size.
 * Items are kept in content-stream order, which for typeset papers is column by column — the
 * reading order; sorting by position would interleave the two columns of a page.
 */
function toLines(items: readonly PositionedText[]): Line[] {
  const lines: Line[] = [];
  let text = '';
  let y = 0;
  let height = 0;
  let right = 0;
  const endLine = (): void => {
    const line = normaliseInline(text);
    if (line !== '') lines.push({ text: line, y, height });
    text = '';
    height = 0;
  };
  for (const item of items) {
    if (item.str !== '') {
      const size = Math.max(item.height, 1);
      if (text !== '' && Math.abs(item.y - y) > Math.max(size, height) * 0.6) endLine();
      // Some producers position words without space glyphs; a visible gap is a word break.
      if (text !== '' && !/\s$/.test(text) && !/^\s/.test(item.str) && item.x - right > size * 0.25) text += ' ';
      if (text === '') y = item.y;
      text += item.str;
      height = Math.max(height, size);
      right = item.x + item.width;
    }
    if (item.hasEOL) endLine();
  }
  endLine();
  return lines;
}

/** The usual distance between consecutive lines of the page, the yardstick for paragraph gaps. */
function typicalSpacing(lines: readonly Line[]): number {
  const drops: number[] = [];
  for (let i = 1; i < lines.length; i += 1) {
    const drop = (lines[i - 1]?.y ?? 0) - (lines[i]?.y ?? 0);
    if (drop > 0) drops.push(drop);
  }
  drops.sort((a, b) => a - b);
  return drops[Math.floor(drops.length / 2)] ?? 0;
}

/**
 * A new paragraph starts where the gap to the previous line is clearly wider than the page's
 * usual line spacing, or where the text jumps up the page (the top of the next column).
 */
function startsParagraph(previous: Line, line: Line, spacing: number): boolean {
  const drop = previous.y - line.y;
  const size = Math.max(previous.height, line.height);
  return drop < -size * 0.5 || drop > Math.max(spacing * 1.4, size * 1.1);
}

const hyphenated = /\p{L}+-\p{L}+/gu;

/**
 * Reflows lines into prose. A line-end hyphen is dropped ("ef-" + "ficient") unless the page also
 * writes the word with a hyphen inside a line ("open-domain"), and kept before a capital or a
 * digit ("Lucene-" + "BM25").
 */
function joinLines(lines: readonly string[], hyphenatedWords: ReadonlySet<string>): string {
  let out = '';
  for (const line of lines) {
    if (out === '') {
      out = line;
      continue;
    }
    const head = /(\p{L}+)-$/u.exec(out)?.[1];
    const tail = /^\p{Ll}+/u.exec(line)?.[0];
    if (head !== undefined && tail !== undefined && !hyphenatedWords.has(`${head}-${tail}`.toLowerCase())) {
      out = out.slice(0, -1) + line;
    } else if (out.endsWith('-')) out += line;
    else out += ` ${line}`;
  }
  return out;
}

/** A page's text as paragraphs: lines reflowed into prose, paragraphs split on vertical gaps. */
export function pageParagraphs(items: readonly PositionedText[]): string[] {
  const lines = toLines(items);
  const spacing = typicalSpacing(lines);
  const hyphenatedWords = new Set(lines.flatMap((line) => line.text.toLowerCase().match(hyphenated) ?? []));
  const paragraphs: string[] = [];
  let current: string[] = [];
  let previous: Line | undefined;
  for (const line of lines) {
    if (previous !== undefined && startsParagraph(previous, line, spacing)) {
      paragraphs.push(joinLines(current, hyphenatedWords));
      current = [];
    }
    current.push(line.text);
    previous = line;
  }
  if (current.length > 0) paragraphs.push(joinLines(current, hyphenatedWords));
  return paragraphs;
}
