import type { FastifyInstance } from 'fastify';
import { maxJsonNesting, nestsDeeperThan } from '../json-nesting.ts';
import { AppError } from './errors.ts';

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
