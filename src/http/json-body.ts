import type { FastifyInstance } from 'fastify';
import { maxJsonNesting, nestsDeeperThan, wellFormedJson } from '../json-nesting.ts';
import { AppError } from './errors.ts';

export const tooDeep = (what: string): AppError =>
  new AppError({ code: 'invalid_json', message: `${what} is nested too deeply (more than ${maxJsonNesting} levels)` });

/**
 * Fastify's own JSON parser (prototype-poisoning checks included), behind a nesting limit. An
 * empty body is no body: clients that send `Content-Type: application/json` on every request (a
 * session's default headers) also send it on a DELETE, which Fastify refused with a 400; a route
 * that needs a body says it is missing. Lone surrogates in its strings become U+FFFD.
 */
export function installJsonParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string;
    if (text.trim() === '') {
      done(null, undefined);
      return;
    }
    if (nestsDeeperThan(text, maxJsonNesting)) {
      done(tooDeep('Request body'), undefined);
      return;
    }
    void parse(request, text, (error, value) => done(error, error ? undefined : wellFormedJson(text, value)));
  });
}
