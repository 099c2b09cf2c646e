/**
 * Token-aware chunking. Text is cut at paragraph, then sentence, then word boundaries, each piece
 * measured with the embedding model's own tokenizer, and packed greedily into chunks of at most
 * `maxTokens`; consecutive chunks share about `overlapTokens` of trailing sentences so a fact cut
 * at a boundary is still whole in one of them. Offsets always point into the original text.
 */

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

function paragraphs(text: string): { start: number; end: number }[] {
  const spans: { start: number; end: number }[] = [];
  const separator = /\n[ \t]*\n+/g;
  let start = 0;
  for (const match of text.matchAll(separator)) {
    spans.push({ start, end: match.index });
    start = match.index + match[0].length;
  }
  spans.push({ start, end: text.length });
  return spans.filter((s) => text.slice(s.start, s.end).trim() !== '');
}

function segments(text: string, start: number, end: number, segmenter: Intl.Segmenter) {
  const out: { start: number; end: number }[] = [];
  for (const s of segmenter.segment(text.slice(start, end))) {
    out.push({ start: start + s.index, end: start + s.index + s.segment.length });
  }
  return out;
}

/** Trims whitespace off a span's ends, so chunks never start or end with blanks. */
function trimSpan(text: string, span: { start: number; end: number }) {
  let { start, end } = span;
  while (start < end && /\s/.test(text[start] ?? '')) start++;
  while (end > start && /\s/.test(text[end - 1] ?? '')) end--;
  return { start, end };
}

async function measure(text: string, spans: { start: number; end: number }[], tokenizer: TokenCounter) {
  const counts = await tokenizer.countTokens(spans.map((s) => text.slice(s.start, s.end)));
  return spans.map((s, i) => ({ ...s, tokens: counts[i] ?? 0 }));
}

/** Splits one span into pieces that each fit, going down to words and finally characters. */
async function fit(
  text: string,
  span: { start: number; end: number },
  tokens: number,
  max: number,
  tokenizer: TokenCounter,
) {
  if (tokens <= max) return [{ ...span, tokens }];
  const words = segments(text, span.start, span.end, wordSegmenter);
  const measured = await measure(text, words, tokenizer);
  const out: { start: number; end: number; tokens: number }[] = [];
  let current: { start: number; end: number; tokens: number } | undefined;
  for (const word of measured) {
    if (word.tokens > max) {
      // A single "word" longer than a chunk (a hash, a base64 blob): cut it by characters.
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
    } else if (current && current.tokens + word.tokens <= max) {
      current = { start: current.start, end: word.end, tokens: current.tokens + word.tokens };
    } else {
      if (current) out.push(current);
      current = { ...word };
    }
  }
  if (current) out.push(current);
  return out.map((p) => ({ ...trimSpan(text, p), tokens: p.tokens })).filter((p) => p.end > p.start);
}

async function pieces(text: string, maxTokens: number, tokenizer: TokenCounter): Promise<Piece[]> {
  const result: Piece[] = [];
  for (const paragraph of paragraphs(text)) {
    const sentences = segments(text, paragraph.start, paragraph.end, sentenceSegmenter)
      .map((s) => trimSpan(text, s))
      .filter((s) => s.end > s.start);
    const measured = await measure(text, sentences, tokenizer);
    let first = true;
    for (const sentence of measured) {
      for (const piece of await fit(text, sentence, sentence.tokens, maxTokens, tokenizer)) {
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
  const all = await pieces(text, maxTokens, tokenizer);
  const chunks: Chunk[] = [];
  let i = 0;
  while (i < all.length) {
    let tokens = 0;
    let j = i;
    while (j < all.length && tokens + (all[j] as Piece).tokens <= maxTokens) {
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
