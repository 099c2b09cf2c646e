/**
 * Token-aware chunking. Text is cut at paragraph, then sentence, then word boundaries, each piece
 * measured with the embedding model's own tokenizer, and packed greedily into chunks of at most
 * `maxTokens`; consecutive chunks share about `overlapTokens` of trailing sentences so a fact cut
 * at a boundary is still whole in one of them. Offsets always point into the original text.
 * Chunking runs on the event loop, so all of it proceeds in bounded steps.
 */
import { setImmediate as yieldToLoop } from 'node:timers/promises';

export interface TokenCounter {
  /** Tokens of each text, without the special tokens the model adds around a whole input. */
  countTokens(texts: readonly string[]): Promise<number[]>;
}

export interface ChunkingOptions {
  maxTokens: number;
  overlapTokens: number;
}

export interface Chunk {
  position: number;
  startChar: number;
  endChar: number;
  tokenCount: number;
  content: string;
}

interface Piece {
  start: number;
  end: number;
  tokens: number;
  /** A piece that starts a paragraph: preferred place to start a chunk. */
  paragraphStart: boolean;
}

const sentenceSegmenter = new Intl.Segmenter(undefined, { granularity: 'sentence' });
const wordSegmenter = new Intl.Segmenter(undefined, { granularity: 'word' });

/**
 * Characters a chunk may hold per token of its budget. Real text stays far below it (English
 * about 4, base64 about 3); only a run the tokenizer reads as one unknown token — a 50 MB line
 * without a space — comes near it, and must still be cut into chunks of a sane size.
 */
const maxCharsPerToken = 32;
/** Text and texts per tokenizer call, segments per pass: chunking a huge document never holds the event loop for long. */
const measureBatchChars = 32_768;
const measureBatchSpans = 512;
const segmentsPerPass = 4096;
const segmentWindow = 65_536;

interface Span {
  start: number;
  end: number;
}

function paragraphs(text: string): Span[] {
  const spans: Span[] = [];
  const separator = /\n[ \t]*\n+/g;
  let start = 0;
  for (const match of text.matchAll(separator)) {
    spans.push({ start, end: match.index });
    start = match.index + match[0].length;
  }
  spans.push({ start, end: text.length });
  return spans.filter((s) => text.slice(s.start, s.end).trim() !== '');
}

/**
 * Segments of a span. ICU scans a run without boundaries in one step (10 MB of letters: ~170 ms),
 * so the span is fed to it in windows that end at a line break or space where there is one.
 */
async function* segmentsOf(text: string, span: Span, segmenter: Intl.Segmenter): AsyncGenerator<Span> {
  let seen = 0;
  for (let from = span.start; from < span.end;) {
    let to = Math.min(span.end, from + segmentWindow);
    if (to < span.end) to = windowEnd(text, from, to);
    for (const s of segmenter.segment(text.slice(from, to))) {
      yield { start: from + s.index, end: from + s.index + s.segment.length };
      if (++seen % segmentsPerPass === 0) await yieldToLoop();
    }
    from = to;
  }
}

/** Where a window ending near `to` should end: after the last line break, else space, in its second half. */
function windowEnd(text: string, from: number, to: number): number {
  const window = text.slice(from + segmentWindow / 2, to);
  const newline = window.lastIndexOf('\n');
  const at = newline >= 0 ? newline : window.lastIndexOf(' ');
  if (at >= 0) return from + segmentWindow / 2 + at + 1;
  // No space at all: cut anywhere but inside a surrogate pair.
  return /[\ud800-\udbff]/.test(text.charAt(to - 1)) ? to - 1 : to;
}

async function segments(text: string, span: Span, segmenter: Intl.Segmenter): Promise<Span[]> {
  const out: Span[] = [];
  for await (const segment of segmentsOf(text, span, segmenter)) out.push(segment);
  return out;
}

/**
 * The words of a long span in batches of about `measureBatchChars`, so that not all of them are
 * held at once. A "word" longer than a chunk may hold (a hash, a base64 blob, a line without
 * spaces) is cut by characters first.
 */
async function* wordBatches(text: string, span: Span, maxChars: number): AsyncGenerator<Span[]> {
  let batch: Span[] = [];
  let chars = 0;
  for await (const { start, end } of segmentsOf(text, span, wordSegmenter)) {
    for (let from = start; from < end; from += maxChars) {
      const to = Math.min(end, from + maxChars);
      batch.push({ start: from, end: to });
      chars += to - from;
      if (chars >= measureBatchChars || batch.length >= measureBatchSpans) {
        yield batch;
        batch = [];
        chars = 0;
      }
    }
  }
  if (batch.length > 0) yield batch;
}

/** Trims whitespace off a span's ends, so chunks never start or end with blanks. */
function trimSpan(text: string, span: Span): Span {
  let { start, end } = span;
  while (start < end && /\s/.test(text[start] ?? '')) start++;
  while (end > start && /\s/.test(text[end - 1] ?? '')) end--;
  return { start, end };
}

/**
 * Token counts of spans, in tokenizer calls of bounded size with the event loop served between
 * them. A span longer than `maxChars` is not counted (it cannot be one piece anyway): Infinity.
 */
async function measure(text: string, spans: Span[], tokenizer: TokenCounter, maxChars = Infinity) {
  const out: (Span & { tokens: number })[] = [];
  for (let i = 0; i < spans.length;) {
    const batch: Span[] = [];
    let chars = 0;
    for (
      ;
      i < spans.length && batch.length < measureBatchSpans && (batch.length === 0 || chars < measureBatchChars);
      i++
    ) {
      const span = spans[i] as Span;
      batch.push(span);
      chars += span.end - span.start;
    }
    const counted = batch.filter((s) => s.end - s.start <= maxChars);
    const counts = await tokenizer.countTokens(counted.map((s) => text.slice(s.start, s.end)));
    const byIndex = new Map(counted.map((s, k) => [s, counts[k] ?? 0]));
    for (const span of batch) out.push({ ...span, tokens: byIndex.get(span) ?? Infinity });
    await yieldToLoop();
  }
  return out;
}

/** Splits one span into pieces that each fit, going down to words and finally characters. */
async function fit(text: string, span: Span, tokens: number, max: number, maxChars: number, tokenizer: TokenCounter) {
  if (tokens <= max) return [{ ...span, tokens }];
  const out: (Span & { tokens: number })[] = [];
  let current: (Span & { tokens: number }) | undefined;
  for await (const batch of wordBatches(text, span, maxChars)) {
    for (const word of await measure(text, batch, tokenizer)) {
      if (word.tokens > max) {
        // A single "word" longer than a chunk: cut it by characters.
        if (current) out.push(current);
        current = undefined;
        const step = Math.max(1, Math.floor(((word.end - word.start) * max) / word.tokens));
        for (let s = word.start; s < word.end; s += step) {
          const e = Math.min(word.end, s + step);
          out.push({
            start: s,
            end: e,
            tokens: Math.min(max, Math.ceil((word.tokens * (e - s)) / (word.end - word.start))),
          });
        }
      } else if (current && current.tokens + word.tokens <= max && word.end - current.start <= maxChars) {
        current = { start: current.start, end: word.end, tokens: current.tokens + word.tokens };
      } else {
        if (current) out.push(current);
        current = { ...word };
      }
    }
  }
  if (current) out.push(current);
  return out.map((p) => ({ ...trimSpan(text, p), tokens: p.tokens })).filter((p) => p.end > p.start);
}

async function pieces(text: string, maxTokens: number, maxChars: number, tokenizer: TokenCounter): Promise<Piece[]> {
  const result: Piece[] = [];
  for (const paragraph of paragraphs(text)) {
    const sentences = (await segments(text, paragraph, sentenceSegmenter))
      .map((s) => trimSpan(text, s))
      .filter((s) => s.end > s.start);
    const measured = await measure(text, sentences, tokenizer, maxChars);
    let first = true;
    for (const sentence of measured) {
      for (const piece of await fit(text, sentence, sentence.tokens, maxTokens, maxChars, tokenizer)) {
        result.push({ ...piece, paragraphStart: first });
        first = false;
      }
    }
  }
  return result;
}

export async function chunkText(text: string, tokenizer: TokenCounter, options: ChunkingOptions): Promise<Chunk[]> {
  const { maxTokens } = options;
  const overlap = Math.min(options.overlapTokens, Math.floor(maxTokens / 2));
  const maxChars = maxTokens * maxCharsPerToken;
  const all = await pieces(text, maxTokens, maxChars, tokenizer);
  const chunks: Chunk[] = [];
  let i = 0;
  while (i < all.length) {
    let tokens = 0;
    let j = i;
    const from = (all[i] as Piece).start;
    while (
      j < all.length &&
      tokens + (all[j] as Piece).tokens <= maxTokens &&
      (j === i || (all[j] as Piece).end - from <= maxChars)
    ) {
      tokens += (all[j] as Piece).tokens;
      j++;
    }
    // Prefer ending at a paragraph boundary when that still leaves the chunk well filled.
    if (j < all.length && !(all[j] as Piece).paragraphStart) {
      let filled = tokens;
      for (let m = j - 1; m > i; m--) {
        filled -= (all[m] as Piece).tokens;
        if (filled < maxTokens * 0.6) break;
        if ((all[m] as Piece).paragraphStart) {
          tokens = filled;
          j = m;
          break;
        }
      }
    }
    const first = all[i] as Piece;
    const last = all[j - 1] as Piece;
    chunks.push({
      position: chunks.length,
      startChar: first.start,
      endChar: last.end,
      tokenCount: tokens,
      content: text.slice(first.start, last.end),
    });
    if (j >= all.length) break;
    // Step back over trailing pieces worth at most `overlap` tokens, never to the chunk's start.
    let k = j;
    let carried = 0;
    while (k - 1 > i && carried + (all[k - 1] as Piece).tokens <= overlap) {
      carried += (all[k - 1] as Piece).tokens;
      k--;
    }
    i = k;
  }
  return chunks;
}
