// How deeply JSON may nest: checked on request bodies (http/json-body.ts) and on JSON held in
// string fields (document metadata sent as multipart), so it belongs to neither.

/**
 * Deepest nesting a JSON request body may have. Real requests stay far below it (an OpenAI tool
 * schema nests a dozen levels); past a few thousand, JSON.stringify — run when a body is stored
 * (metadata), compiled (filters) or forwarded (chat) — overflows the stack.
 */
export const maxJsonNesting = 100;

/**
 * Whether JSON text nests arrays and objects deeper than `max`: one pass over the text, no
 * recursion. Strings are skipped with `indexOf` to their closing quote (one not escaped: preceded
 * by an even number of backslashes), so a 10 MB document text costs about a millisecond instead of
 * a character-by-character walk (~45 ms of the event loop).
 */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      let end = i;
      for (;;) {
        end = text.indexOf('"', end + 1);
        // Unterminated: not deeper than what came before; the parser refuses the text.
        if (end === -1) return false;
        let backslashes = 0;
        while (text.charCodeAt(end - 1 - backslashes) === 0x5c) backslashes += 1;
        if (backslashes % 2 === 0) break;
      }
      i = end;
    } else if (c === 0x7b || c === 0x5b) {
      depth += 1;
      if (depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth -= 1;
  }
  return false;
}

// A lone UTF-16 surrogate reaches a string only through a `\uD800`-style escape (raw bytes that
// are not UTF-8 already decode as U+FFFD), so the walk below runs only when the text has one.
const surrogateEscape = /\\u[dD][89a-fA-F]/;

/**
 * Parsed JSON with every lone surrogate in its strings and keys made U+FFFD, as text columns store
 * them: PostgreSQL's jsonb refuses the escape (22P02, a 500 for metadata or a filter), and strict
 * JSON parsers refuse it in a response. `text` is what `value` was parsed from.
 */
export function wellFormedJson<T>(text: string, value: T): T {
  if (!surrogateEscape.test(text)) return value;
  const fix = (item: unknown): unknown => {
    if (typeof item === 'string') return item.toWellFormed();
    if (Array.isArray(item)) return item.map(fix);
    if (item !== null && typeof item === 'object') {
      return Object.fromEntries(Object.entries(item).map(([key, entry]) => [key.toWellFormed(), fix(entry)]));
    }
    return item;
  };
  return fix(value) as T;
}

/** What is said of a JSON value holding a key refused everywhere (prototype poisoning). */
export const FORBIDDEN_KEY_MESSAGE =
  'holds a forbidden key ("__proto__", or "constructor" holding "prototype"); rename it';

/**
 * Whether a parsed JSON value holds `__proto__`, or `constructor` holding `prototype`, at any
 * depth: the keys Fastify's JSON parser refuses in a body, refused in multipart metadata alike
 * (where `__proto__` was dropped and `constructor.prototype` stored).
 */
export function holdsForbiddenKey(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item !== 'object' || item === null) continue;
    if (Array.isArray(item)) {
      stack.push(...(item as unknown[]));
      continue;
    }
    for (const key of Object.keys(item)) {
      const child = (item as Record<string, unknown>)[key];
      if (key === '__proto__') return true;
      if (key === 'constructor' && typeof child === 'object' && child !== null && 'prototype' in child) return true;
      stack.push(child);
    }
  }
  return false;
}
