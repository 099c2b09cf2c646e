import { AppError } from '../errors.ts';
import { UpstreamFailure } from './providers/provider.ts';

/** `Retry-After` in whole seconds (at least 1), or nothing when there is no wait to tell. */
function retryAfterHeader(ms: number | undefined): Record<string, string> | undefined {
  return ms === undefined ? undefined : { 'retry-after': String(Math.max(1, Math.ceil(ms / 1000))) };
}

/**
 * An upstream failure as the client sees it: a client error (4xx) keeps the upstream's status,
 * message, code and param; timeouts are 504; everything else, after retries and failover, 502.
 */
export function toClientError(failure: UpstreamFailure): AppError {
  const { status, kind, provider } = failure;
  if (kind === 'timeout') {
    return new AppError({ code: 'upstream_timeout', message: `Provider ${provider} timed out`, cause: failure });
  }
  if (kind === 'status' && status !== undefined && status >= 400 && status < 500 && status !== 401 && status !== 403) {
    const rateLimited = status === 429;
    const headers = rateLimited ? retryAfterHeader(failure.retryAfterMs) : undefined;
    return new AppError({
      code: rateLimited ? 'rate_limit_exceeded' : 'invalid_value',
      message: failure.message,
      ...(failure.param === undefined ? {} : { param: failure.param }),
      upstream: {
        status,
        type: rateLimited ? 'rate_limit_error' : 'invalid_request_error',
        code: failure.code ?? (rateLimited ? 'rate_limit_exceeded' : 'invalid_value'),
      },
      ...(headers ? { headers } : {}),
      cause: failure,
    });
  }
  // A 5xx body is not shown (it may be an HTML page or a stack trace); an in-band error event is
  // JSON the upstream wrote for its client.
  const detail =
    kind === 'status'
      ? failure.inBand
        ? `reported an error: ${failure.message}`
        : status === undefined
          ? 'failed'
          : `answered HTTP ${status}`
      : kind === 'protocol'
        ? 'sent an invalid response'
        : kind === 'aborted'
          ? 'request was aborted'
          : 'is unreachable';
  // Every provider's breaker is open: tell the client when one takes a request again (the OpenAI
  // SDKs wait that long before their own retry).
  const headers = retryAfterHeader(failure.availableInMs);
  return new AppError({
    code: 'upstream_error',
    message: kind === 'unavailable' ? failure.message : `Provider ${provider} ${detail}`,
    ...(headers ? { headers } : {}),
    cause: failure,
  });
}

/** Anything a gateway call threw, as an AppError. */
export function asAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  if (error instanceof UpstreamFailure) return toClientError(error);
  return new AppError({ code: 'internal_error', message: 'Internal server error', cause: error });
}
