import type { FastifyInstance } from 'fastify';
import { AppError } from './errors.ts';

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

export const tooDeep = (what: string): AppError =>
  new AppError({ code: 'invalid_json', message: `${what} is nested too deeply (more than ${maxJsonNesting} levels)` });

/** Fastify's own JSON parser (prototype-poisoning checks included), behind a nesting limit. */
export function installJsonParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string;
    if (nestsDeeperThan(text, maxJsonNesting)) {
      done(tooDeep('Request body'), undefined);
      return;
    }
    void parse(request, text, done);
  });
}
