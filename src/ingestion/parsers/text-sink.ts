import { defaultMaxChars } from './types.ts';
import type { ParsedDocument, ParseLimits } from './types.ts';

const inlineSpace = /[\s\u00a0\u200b\ufeff]+/g;

/** Collapses runs of whitespace within a line (tabs, NBSP, zero-width spaces) to one space. */
export const normaliseInline = (line: string): string => line.replace(inlineSpace, ' ').trim();

/**
 * Collects paragraphs up to the character limit. Parsers of large inputs (PDF pages, CSV rows,
 * JSON records) ask `full` so they can stop early instead of rendering text that is thrown away.
 */
export class TextSink {
  readonly maxChars: number;
  private readonly paragraphs: string[] = [];
  private length = 0;
  private truncated: string | undefined;

  constructor(limits: ParseLimits | undefined) {
    this.maxChars = Math.max(0, limits?.maxChars ?? defaultMaxChars);
  }

  get full(): boolean {
    return this.length >= this.maxChars;
  }

  /** Adds a paragraph (blank ones are skipped); returns false once the limit is reached. */
  add(paragraph: string): boolean {
    // Leading spaces stay: they are indentation in code and Markdown.
    const text = paragraph.replace(/^(?:[ \t]*\n)+|\s+$/g, '');
    if (text.trim() === '') return !this.full;
    if (this.full) {
      this.truncated ??= 'max_chars';
      return false;
    }
    const separator = this.paragraphs.length > 0 ? 2 : 0;
    const room = this.maxChars - this.length - separator;
    if (text.length > room) {
      this.truncated ??= 'max_chars';
      // Never leave half of a surrogate pair at the cut.
      const end = room > 0 && /[\ud800-\udbff]/.test(text.charAt(room - 1)) ? room - 1 : room;
      if (end > 0) this.paragraphs.push(text.slice(0, end));
      this.length = this.maxChars;
      return false;
    }
    this.paragraphs.push(text);
    this.length += separator + text.length;
    return true;
  }

  /** Marks the text as cut short for a reason other than length, e.g. `page_limit`. */
  markTruncated(reason: string): void {
    this.truncated ??= reason;
  }

  result(info: Record<string, string | number> = {}): ParsedDocument {
    const text = this.paragraphs.join('\n\n');
    return { text, info: this.truncated === undefined ? info : { ...info, truncated: this.truncated } };
  }
}
