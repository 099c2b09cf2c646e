/**
 * One error type and one renderer for the whole API. A route family decides which of the two
 * body shapes of the contract its errors use; 401, 403 and 429 are structured everywhere.
 */

export type ErrorFamily = 'structured' | 'simple';

interface CodeSpec {
  status: number;
  type: string;
}

/** The closed set of error codes, each with its HTTP status and OpenAI-style type. */
export const errorCodes = {
  invalid_value: { status: 400, type: 'invalid_request_error' },
  missing_field: { status: 400, type: 'invalid_request_error' },
  invalid_json: { status: 400, type: 'invalid_request_error' },
  invalid_api_key: { status: 401, type: 'authentication_error' },
  insufficient_scope: { status: 403, type: 'permission_error' },
  quota_exceeded: { status: 403, type: 'permission_error' },
  not_found: { status: 404, type: 'not_found_error' },
  model_not_found: { status: 404, type: 'not_found_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  conflict: { status: 409, type: 'invalid_request_error' },
  payload_too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error' },
  capacity_exceeded: { status: 429, type: 'rate_limit_error' },
  internal_error: { status: 500, type: 'api_error' },
  upstream_error: { status: 502, type: 'api_error' },
  service_unavailable: { status: 503, type: 'api_error' },
  upstream_timeout: { status: 504, type: 'api_error' },
} as const satisfies Record<string, CodeSpec>;

export type ErrorCode = keyof typeof errorCodes;

export interface AppErrorOptions {
  code: ErrorCode;
  message: string;
  /** The request field at fault, reported as `param` in structured bodies. */
  param?: string;
  /** Extra top-level fields of a simple body, e.g. `document_id` of a duplicate upload. */
  extra?: Record<string, string>;
  headers?: Record<string, string>;
  cause?: unknown;
  /** An upstream provider's 4xx passed through: its status, type and code replace the code's. */
  upstream?: { status: number; type: string; code: string };
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly param: string | undefined;
  readonly extra: Record<string, string> | undefined;
  readonly headers: Record<string, string> | undefined;
  readonly upstream: AppErrorOptions['upstream'];

  constructor(options: AppErrorOptions) {
    super(options.message, { cause: options.cause });
    this.name = 'AppError';
    this.code = options.code;
    this.param = options.param;
    this.extra = options.extra;
    this.headers = options.headers;
    this.upstream = options.upstream;
  }

  get status(): number {
    return this.upstream?.status ?? errorCodes[this.code].status;
  }

  get type(): string {
    return this.upstream?.type ?? errorCodes[this.code].type;
  }

  /** The code the client sees: ours, or the upstream's when passed through. */
  get reportedCode(): string {
    return this.upstream?.code ?? this.code;
  }
}

export const notFound = (message: string): AppError => new AppError({ code: 'not_found', message });

export const invalid = (message: string, param?: string): AppError =>
  new AppError({ code: 'invalid_value', message, ...(param === undefined ? {} : { param }) });

/**
 * A 400 from the first issue of a zod validation done in a handler (input fastify's validator
 * does not see): `<prefix><path>: <message>`, or `<whole>: <message>` for the value as a whole.
 */
export function invalidFromIssues(
  issues: readonly { path: PropertyKey[]; message: string }[],
  names: { prefix: string; whole: string },
): AppError {
  const first = issues[0];
  const path = first?.path.map(String).join('.') ?? '';
  return invalid(`${path ? names.prefix + path : names.whole}: ${first?.message ?? 'invalid value'}`);
}

export interface StructuredErrorBody {
  error: { message: string; type: string; code: string; param?: string };
}

export type SimpleErrorBody = { error: string } & Record<string, string>;

export type ErrorBody = StructuredErrorBody | SimpleErrorBody;

const alwaysStructured = new Set([401, 403, 429]);

/** Renders an AppError as the body shape its route family uses. 5xx messages never leak. */
export function renderError(error: AppError, family: ErrorFamily): ErrorBody {
  const message = error.status === 500 ? 'Internal server error' : error.message;
  if (family === 'simple' && !alwaysStructured.has(error.status)) {
    return { ...error.extra, error: message };
  }
  const body: StructuredErrorBody = { error: { message, type: error.type, code: error.reportedCode } };
  if (error.param !== undefined) body.error.param = error.param;
  return body;
}
