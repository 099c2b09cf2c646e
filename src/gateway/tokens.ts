import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';

export type Counter = (text: string) => number;

interface Encoding {
  countTokens(text: string): number;
}

/**
 * The encoder's merges take time quadratic in the length of a run without spaces: 200,000 × "a"
 * took 33 s, 100,000 emoji 119 s, all of it on the event loop, holding every other request (a
 * chatbot turn counts its history; the gateway counts a prompt when the upstream reports no
 * usage). Runs longer than this are counted in slices of it: linear, and within a token of the
 * whole run's count per slice (exact for runs of one character; a run that long is not prose).
 */
const MAX_RUN = 256;
const longRun = new RegExp(`\\S{${MAX_RUN + 1},}`, 'g');

/** A slice end that does not split a surrogate pair. */
const sliceEnd = (text: string, end: number) =>
  end < text.length && (text.charCodeAt(end) & 0xfc00) === 0xdc00 ? end + 1 : end;

/** The text in pieces to count separately: as it is between long runs, each long run in slices. */
function* pieces(text: string): Generator<string> {
  let last = 0;
  for (const run of text.matchAll(longRun)) {
    if (run.index > last) yield text.slice(last, run.index);
    const runEnd = run.index + run[0].length;
    for (let start = run.index; start < runEnd;) {
      const end = sliceEnd(text, Math.min(start + MAX_RUN, runEnd));
      yield text.slice(start, end);
      start = end;
    }
    last = runEnd;
  }
  if (last < text.length) yield last === 0 ? text : text.slice(last);
}

/** Ordinary text (prose, code) is counted in pieces of about this many characters, cut before a space. */
const SEGMENT = 16_384;

/** `piece` cut before a space every SEGMENT characters or so, for counting with pauses between. */
function* segments(piece: string): Generator<string> {
  let start = 0;
  while (piece.length - start > SEGMENT) {
    const space = piece.indexOf(' ', start + SEGMENT);
    if (space === -1) break;
    yield piece.slice(start, space);
    start = space;
  }
  yield start === 0 ? piece : piece.slice(start);
}

const safeCount = (encoding: Encoding, text: string): number => {
  try {
    return encoding.countTokens(text);
  } catch {
    return Math.ceil(text.length / 4);
  }
};

const countWith = (encoding: Encoding) => (text: string) => {
  if (text === '') return 0;
  let total = 0;
  for (const piece of pieces(text)) total += safeCount(encoding, piece);
  return total;
};

let loading: Promise<Encoding> | undefined;

/**
 * o200k_base (GPT-4o's encoding) from gpt-tokenizer, loaded on first use only: most upstreams
 * report usage themselves, and the encoding costs memory.
 */
const encoding = (): Promise<Encoding> => (loading ??= import('gpt-tokenizer/encoding/o200k_base'));

/** Counts at once, on the calling thread: for text of bounded size (a system prompt, a source). */
export async function tokenCounter(): Promise<Counter> {
  return countWith(await encoding());
}

/** Counting yields the event loop after this long, so a long text does not hold other requests. */
const SLICE_MS = 4;

/**
 * Counts `text` in pieces, letting other work run every few milliseconds: a 10 MB prompt takes
 * about half a second to count, and the event loop must not wait for it.
 */
async function countYielding(encoding: Encoding, text: string, clock: { started: number }): Promise<number> {
  let total = 0;
  for (const piece of pieces(text)) {
    for (const segment of piece.length > SEGMENT ? segments(piece) : [piece]) {
      total += safeCount(encoding, segment);
      if (performance.now() - clock.started > SLICE_MS) {
        await new Promise((resolve) => setImmediate(resolve));
        clock.started = performance.now();
      }
    }
  }
  return total;
}

/**
 * A counter that already knows `texts` (counted with pauses, see `countYielding`) and counts
 * anything else at once: for a chatbot's prompt, whose history may hold long messages while the
 * strings built around them (roles, the system message with its sources) stay short.
 */
export async function counterFor(texts: Iterable<string>): Promise<Counter> {
  const enc = await encoding();
  const known = new Map<string, number>();
  const clock = { started: performance.now() };
  for (const text of texts) {
    if (text !== '' && !known.has(text)) known.set(text, await countYielding(enc, text, clock));
  }
  const count = countWith(enc);
  return (text) => known.get(text) ?? count(text);
}

/** The text of a message's content: the string itself, or its text parts joined. */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content as { type?: string; text?: unknown }[]) {
    if (typeof part.text === 'string') text += part.text;
  }
  return text;
}

/** What one message adds to a prompt as OpenAI counts chat: 3, its role, content, name and tool calls. */
export function messageTokens(count: Counter, message: ChatCompletionMessageParam): number {
  let total = 3 + count(message.role) + count(textOf(message.content));
  if ('name' in message && typeof message.name === 'string') total += 1 + count(message.name);
  if ('tool_calls' in message && Array.isArray(message.tool_calls)) total += count(JSON.stringify(message.tool_calls));
  return total;
}

/** Prompt tokens as OpenAI counts them for chat: each message costs 3 more, the reply primer 3. */
export async function countPromptTokens(messages: readonly ChatCompletionMessageParam[]): Promise<number> {
  const count = await counterFor(messages.map((m) => textOf(m.content)));
  let total = 3;
  for (const message of messages) total += messageTokens(count, message);
  return total;
}

export async function countTextTokens(texts: readonly string[]): Promise<number> {
  const enc = await encoding();
  const clock = { started: performance.now() };
  let total = 0;
  for (const text of texts) total += await countYielding(enc, text, clock);
  return total;
}
