// How deeply JSON may nest: checked on request bodies (http/json-body.ts) and on JSON held in
// string fields (document metadata sent as multipart), so it belongs to neither.

/**
 * Deepest nesting a JSON request body may have. Real requests stay far below it (an OpenAI tool
 * schema nests a dozen levels); past a few thousand, JSON.stringify — run when a body is stored
 * (metadata), compiled (filters) or forwarded (chat) — overflows the stack.
 */
export const maxJsonNesting = 100;

/** Whether JSON text nests arrays and objects deeper than `max`: one pass over the text, no recursion. */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i += 1; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth += 1;
      if (depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth -= 1;
  }
  return false;
}
