/**
 * One error type and one renderer for the whole API. A route family decides which of the two
 * body shapes of the contract its errors use; 401, 403 and 429 are structured everywhere.
 */

import type { AppError, ErrorCode } from '../errors.ts';

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
  headers_too_large: { status: 431, type: 'invalid_request_error' },
  request_timeout: { status: 408, type: 'invalid_request_error' },
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error' },
  capacity_exceeded: { status: 429, type: 'rate_limit_error' },
  internal_error: { status: 500, type: 'api_error' },
  upstream_error: { status: 502, type: 'api_error' },
  service_unavailable: { status: 503, type: 'api_error' },
  upstream_timeout: { status: 504, type: 'api_error' },
} as const satisfies Record<ErrorCode, CodeSpec>;

export { AppError, invalid, invalidFromIssues, notFound } from '../errors.ts';
export type { AppErrorOptions, ErrorCode } from '../errors.ts';

/** The HTTP status an error is answered with. */
export const statusOf = (error: AppError): number => error.upstream?.status ?? errorCodes[error.code].status;

/** The OpenAI-style `type` of a structured error body. */
export const typeOf = (error: AppError): string => error.upstream?.type ?? errorCodes[error.code].type;

export interface StructuredErrorBody {
  error: { message: string; type: string; code: string; param?: string };
}

export type SimpleErrorBody = { error: string } & Record<string, string>;

export type ErrorBody = StructuredErrorBody | SimpleErrorBody;

/** Statuses answered in the structured shape on every route (contract.md). */
export const alwaysStructured: ReadonlySet<number> = new Set([401, 403, 429]);

/** Renders an AppError as the body shape its route family uses. 5xx messages never leak. */
export function renderError(error: AppError, family: ErrorFamily): ErrorBody {
  const status = statusOf(error);
  const message = status === 500 ? 'Internal server error' : error.message;
  if (family === 'simple' && !alwaysStructured.has(status)) {
    return { ...error.extra, error: message };
  }
  const body: StructuredErrorBody = { error: { message, type: typeOf(error), code: error.reportedCode } };
  if (error.param !== undefined) body.error.param = error.param;
  return body;
}
