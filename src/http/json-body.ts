import type { FastifyInstance } from 'fastify';
import { FORBIDDEN_KEY_MESSAGE, maxJsonNesting, nestsDeeperThan, wellFormedJson } from '../json-nesting.ts';
import { AppError } from './errors.ts';

export const tooDeep = (what: string): AppError =>
  new AppError({ code: 'invalid_json', message: `${what} is nested too deeply (more than ${maxJsonNesting} levels)` });

/**
 * Fastify's own JSON parser (prototype-poisoning checks included), behind a nesting limit. An
 * empty body is no body: clients that send `Content-Type: application/json` on every request (a
 * session's default headers) also send it on a DELETE, which Fastify refused with a 400; a route
 * that needs a body says it is missing. Lone surrogates in its strings become U+FFFD.
 */
/**
 * Why a request body cannot be read as sent, if it cannot: compressed (`Content-Encoding` other
 * than `identity`: gzip bodies were read as text and refused as invalid JSON, an unknown coding
 * taken as plain), or declared in a charset other than UTF-8 (a latin-1 `é` was stored as U+FFFD,
 * a UTF-16 body refused as invalid JSON).
 */
export function unreadableBody(headers: {
  'content-encoding'?: string;
  'content-type'?: string;
}): AppError | undefined {
  const coding = headers['content-encoding']?.trim().toLowerCase();
  if (coding !== undefined && coding !== '' && coding !== 'identity') {
    return new AppError({
      code: 'unsupported_media_type',
      message: `Content-Encoding '${coding}' is not supported: send the body uncompressed`,
    });
  }
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(headers['content-type'] ?? '')?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    return new AppError({
      code: 'unsupported_media_type',
      message: `charset '${charset}' is not supported: send the body in UTF-8`,
    });
  }
  return undefined;
}

const validJson = (text: string) => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};

/** Valid JSON refused by the parser: it holds a prototype-poisoning key ("not valid JSON" said wrongly). */
const forbiddenKey = () => new AppError({ code: 'invalid_json', message: `Request body ${FORBIDDEN_KEY_MESSAGE}` });

export function installJsonParser(app: FastifyInstance): void {
  // Before any parser reads the body (JSON, multipart, text), after authentication.
  app.addHook('preParsing', async (request) => {
    if (request.is404) return;
    const { headers } = request;
    const hasBody = headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0;
    const refused = hasBody ? unreadableBody(headers) : undefined;
    if (refused) throw refused;
  });
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string;
    // No route would read it: an unknown route is a 404 whatever its body (it was a 400 for a
    // malformed one).
    if (request.is404 || text.trim() === '') {
      done(null, undefined);
      return;
    }
    if (nestsDeeperThan(text, maxJsonNesting)) {
      done(tooDeep('Request body'), undefined);
      return;
    }
    void parse(request, text, (error, value) => {
      if (error) done(validJson(text) ? forbiddenKey() : error, undefined);
      else done(null, wellFormedJson(text, value));
    });
  });
}
