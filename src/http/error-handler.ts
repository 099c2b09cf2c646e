import { DISK_FULL_CODE } from '../db/disk-guard.ts';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { AppError, renderError, statusOf, type ErrorCode, type ErrorFamily } from './errors.ts';
import type { RouteEntry } from './route-config.ts';

const statusCodes: Record<number, ErrorCode> = {
  400: 'invalid_value',
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limit_exceeded',
  503: 'service_unavailable',
};

/** Errors meaning the database cannot be reached right now: 503 so clients retry, never 500. */
const unavailableCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08001',
  '08003',
  '08006',
  // Insufficient resources: too many connections, out of memory, a configuration limit.
  '53000',
  '53200',
  '53300',
  '53400',
  // The database itself is gone or renamed away (and may come back).
  '3D000',
  '57P04',
]);

/** PostgreSQL's disk_full (and the embedded database's disk guard): nothing was written. */
const DISK_FULL = DISK_FULL_CODE;

function codesOf(error: unknown): string[] {
  const codes: string[] = [];
  for (let e = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') codes.push(code);
  }
  return codes;
}

function isDatabaseUnavailable(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && unavailableCodes.has(code)) return true;
    if (
      /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/.test(
        e.message,
      )
    ) {
      return true;
    }
  }
  return false;
}

/**
 * PostgreSQL refuses some text outright: a NUL character in text (22021) or jsonb (22P05), and
 * JSON nested past its stack limit (54001). Such text only comes from the request, so the client
 * gets a 400 wherever in a query it ends up (a name, a description, metadata, a filter).
 */
const refusedInputCodes: Record<string, string> = {
  '22021': 'Text with a NUL character (\\u0000) cannot be stored or searched; remove it',
  '22P05': 'Text with a NUL character (\\u0000) cannot be stored or searched; remove it',
  '54001': 'A value is nested too deeply to be stored or searched',
};

function refusedInput(error: unknown): string | undefined {
  for (let e = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code in refusedInputCodes) return refusedInputCodes[code];
  }
  return undefined;
}

/** fastify-type-provider-zod reports each zod issue as keyword (the issue code), path and message. */
interface ValidationIssue {
  keyword?: string;
  instancePath?: string;
  message?: string;
}

function fromValidation(error: FastifyError): AppError {
  const first = (error.validation?.[0] ?? {}) as ValidationIssue;
  const path = (first.instancePath ?? '').replace(/^\//, '').replaceAll('/', '.');
  // zod leaves the input out of its issues; a missing field reads "received undefined".
  const missing = first.keyword === 'invalid_type' && /received undefined/.test(first.message ?? '');
  const where = path === '' ? (error.validationContext ?? 'request') : path;
  // No body at all (none sent, or an empty one): Fastify hands the schema null.
  const noBody =
    where === 'body' && first.keyword === 'invalid_type' && /received (null|undefined)/.test(first.message ?? '');
  if (noBody) return new AppError({ code: 'missing_field', message: 'Request body is missing: send a JSON object' });
  const message = missing ? `${where}: required` : `${where}: ${first.message ?? 'invalid value'}`;
  return new AppError({ code: missing ? 'missing_field' : 'invalid_value', message, ...(path ? { param: path } : {}) });
}

/** Maps anything thrown while serving a request to the contract's error. Bad input is never a 500. */
export function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  const fe = error as FastifyError;
  if (hasZodFastifySchemaValidationErrors(fe)) return fromValidation(fe);
  if (isResponseSerializationError(fe))
    return new AppError({ code: 'internal_error', message: 'Response serialization failed', cause: error });
  const refused = refusedInput(error);
  if (refused !== undefined) return new AppError({ code: 'invalid_value', message: refused, cause: error });
  if (codesOf(error).includes(DISK_FULL)) {
    return new AppError({
      code: 'service_unavailable',
      message: 'The database is out of disk space: nothing was written; retry once space is freed',
      cause: error,
    });
  }
  if (isDatabaseUnavailable(error)) {
    return new AppError({ code: 'service_unavailable', message: 'Database unavailable, retry shortly', cause: error });
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError({
        code: 'invalid_json',
        message: 'Request body is empty but Content-Type is application/json',
      });
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new AppError({ code: 'invalid_json', message: 'Request body is not valid JSON' });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError({ code: 'payload_too_large', message: 'Request body is too large' });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError({
        code: 'unsupported_media_type',
        message: 'Unsupported Content-Type; send application/json',
      });
    default:
      break;
  }
  if (error instanceof SyntaxError && fe.statusCode === 400) {
    return new AppError({ code: 'invalid_json', message: 'Request body is not valid JSON' });
  }
  const status = fe.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new AppError({ code: statusCodes[status] ?? 'invalid_value', message: fe.message });
  }
  return new AppError({ code: 'internal_error', message: 'Internal server error', cause: error });
}

const familyOf = (request: FastifyRequest) => request.routeOptions.config.family ?? 'structured';

/** Whether the client is gone: its connection closed, or its body cut short. */
const clientLeft = (request: FastifyRequest, reply: FastifyReply): boolean =>
  reply.raw.destroyed || request.raw.readableAborted || request.raw.socket.destroyed;

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => {
    // Only here is the route's own limit known: say it.
    const limit = request.routeOptions.bodyLimit;
    const appError =
      (error as FastifyError).code === 'FST_ERR_CTP_BODY_TOO_LARGE' && limit !== undefined
        ? new AppError({
            code: 'payload_too_large',
            message: `Request body is too large: at most ${limit.toLocaleString('en-US')} bytes`,
          })
        : toAppError(error);
    const status = statusOf(appError);
    // A client that left (mid-body, or while its request waited or ran) is no fault of ragport's:
    // what failed because of it was logged as an error with a stack (a body cut short as
    // "Database unavailable", a queued code run as "shutting down", a web search as a 500).
    if (clientLeft(request, reply)) {
      request.log.info({ reason: (error as Error).message }, 'client disconnected before the answer');
    } else if (status === 503 && error instanceof AppError && error.cause === undefined) {
      // A 503 ragport decided on (not configured, shutting down, not ready yet) is a state, not a
      // fault: one warning line, no stack (each webhook call without WEBHOOK_SIGNING_KEY logged one).
      request.log.warn({ code: appError.code, reason: appError.message }, 'request refused: service unavailable');
    } else if (status >= 500) request.log.error({ err: error }, 'request failed');
    if (appError.headers) void reply.headers(appError.headers);
    const body = renderError(appError, familyOf(request));
    // An upstream's code is outside our enum, so the documented schema would refuse it: sent as is.
    return reply
      .code(statusOf(appError))
      .type('application/json; charset=utf-8')
      .send(appError.upstream ? JSON.stringify(body) : body);
  });

  app.setNotFoundHandler((request, reply) => {
    const error = new AppError({
      code: 'not_found',
      message: `Route ${request.method} ${request.url.split('?')[0] ?? ''} not found`,
    });
    return reply.code(404).send(renderError(error, 'structured'));
  });
}

/** The family of the route a path would reach, from the route table (parameters match any segment). */
function familyOfPath(routes: readonly RouteEntry[], path: string): ErrorFamily {
  const segments = path.split('/');
  const route = routes.find((r) => {
    const pattern = r.url.split('/');
    return (
      pattern.length === segments.length && pattern.every((part, i) => part.startsWith(':') || part === segments[i])
    );
  });
  return route?.family ?? 'structured';
}

/**
 * Told of each request answered before any route or hook ran (`ragport_http_requests_total`
 * counts them as `unmatched`: they were counted nowhere).
 */
export type AnsweredEarly = (method: string, status: number) => void;

/**
 * Fastify's `frameworkErrors`: what the router refuses before any route runs — a path segment that
 * is not valid percent-encoding, a parameter over the router's length limit — as a 400 in the
 * contract's shape for the route the path was meant for, instead of fastify's own body.
 */
export function frameworkErrorHandler(routes: readonly RouteEntry[], answered?: AnsweredEarly) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const message =
      error.code === 'FST_ERR_BAD_URL'
        ? 'Malformed URL: a path segment is not valid percent-encoding'
        : error.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? 'A path parameter is too long'
          : undefined;
    const appError = message === undefined ? toAppError(error) : new AppError({ code: 'invalid_value', message });
    const family = familyOfPath(routes, (request.raw.url ?? '').split('?')[0] ?? '');
    void reply.header('x-request-id', request.id);
    void reply.code(statusOf(appError)).type('application/json; charset=utf-8').send(renderError(appError, family));
    answered?.(request.method, statusOf(appError));
  };
}

/**
 * Node's HTTP parser refuses a request before fastify sees it: headers over its limit (16 KB)
 * are 431, anything it cannot parse 400, a request that did not arrive in time 408. Answered in
 * the contract's shape for the route the request line names (fastify's own body otherwise), and
 * the connection closed: the parser cannot read on from where it stopped.
 */
export function clientErrorHandler(routes: readonly RouteEntry[], answered?: AnsweredEarly) {
  return (error: Error & { code?: string; rawPacket?: unknown }, socket: Socket): void => {
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    const [code, status, message] =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? (['headers_too_large', 431, 'Request header fields too large (16 KB at most)'] as const)
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? (['request_timeout', 408, 'The request did not arrive in time'] as const)
          : (['invalid_value', 400, 'Malformed HTTP request'] as const);
    const raw = Buffer.isBuffer(error.rawPacket) ? error.rawPacket : Buffer.alloc(0);
    const line = raw.subarray(0, 2_048).toString('latin1').split('\r\n', 1)[0] ?? '';
    const [method, target] = line.split(' ');
    const path = (target ?? '').split('?')[0] ?? '';
    const body = JSON.stringify(renderError(new AppError({ code, message }), familyOfPath(routes, path)));
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    answered?.(method !== undefined && /^[A-Z]{1,16}$/.test(method) ? method : 'unknown', status);
  };
}
