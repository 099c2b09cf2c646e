/**
 * The one error type of ragport's domain modules. A service throws `AppError({ code, message })`;
 * how a code becomes an HTTP status, an OpenAI-style type and one of the contract's two body
 * shapes is the HTTP layer's business (`http/errors.ts`), so domain code never imports `http/`.
 */

/** The closed set of error codes; `http/errors.ts` maps each to a status and a type. */
export const errorCodeNames = [
  'invalid_value',
  'missing_field',
  'invalid_json',
  'invalid_api_key',
  'insufficient_scope',
  'quota_exceeded',
  'not_found',
  'model_not_found',
  'method_not_allowed',
  'conflict',
  'payload_too_large',
  'unsupported_media_type',
  'headers_too_large',
  'request_timeout',
  'rate_limit_exceeded',
  'capacity_exceeded',
  'internal_error',
  'upstream_error',
  'service_unavailable',
  'upstream_timeout',
] as const;

export type ErrorCode = (typeof errorCodeNames)[number];

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
