import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

/** Paths that could carry secrets are censored wherever they appear in a log line. */
const redact = [
  'req.headers.authorization',
  'headers.authorization',
  'authorization',
  'key',
  'secret',
  'apiKey',
  'api_key',
  '*.apiKey',
  '*.api_key',
];

/** Query parameters whose value may be a secret: `?api_key=…`, `?token=…`, `?access_token=…`. */
const secretParam = /^(?:.*[_-])?(?:key|token|secret|password|auth|authorization|signature)$/i;

/**
 * A request's URL as logged: the values of query parameters named like secrets replaced. ragport
 * reads keys only from the Authorization header, but a client that puts one in the URL (as some
 * SDKs do for other services) must not find it in the request log.
 */
export function redactUrl(url: string): string {
  const at = url.indexOf('?');
  if (at === -1) return url;
  const query = url
    .slice(at + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq === -1 ? pair : pair.slice(0, eq);
      let decoded = name;
      try {
        decoded = decodeURIComponent(name);
      } catch {
        // Not valid percent-encoding: judged as written.
      }
      return eq !== -1 && secretParam.test(decoded) ? `${name}=[redacted]` : pair;
    });
  return `${url.slice(0, at)}?${query.join('&')}`;
}

/**
 * An error's message and its causes', each said once. Wrappers often repeat their cause (`fetch
 * failed` over `fetch failed`, `X is unreachable` over `X is unreachable: ECONNREFUSED`), which
 * pino's own serializer would print twice.
 */
export function messageWithCauses(error: unknown): string {
  let text = '';
  for (let e = error, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const message = e.message.trim();
    if (message === '' || text.includes(message)) continue;
    text = text === '' || message.includes(text) ? message : joinOverlapping(text, message);
  }
  return text;
}

/**
 * `a: b` and `b: c` said as `a: b: c`: a cause that begins with what its wrapper ended with
 * (`Embedding model 'm': Provider p is unreachable` over `Provider p is unreachable: ECONNREFUSED`).
 */
function joinOverlapping(text: string, message: string): string {
  const said = text.split(': ');
  const next = message.split(': ');
  for (let n = Math.min(said.length, next.length - 1); n > 0; n--) {
    if (said.slice(-n).join(': ') === next.slice(0, n).join(': ')) return `${text}: ${next.slice(n).join(': ')}`;
  }
  return `${text}: ${message}`;
}

/**
 * No log line is longer than this (docs/operations.md). A 479 kB filter once produced one
 * 13.7 MB error line (the failed SQL and all its parameters): at a standard key's rate that is
 * ~800 MB of log a minute.
 */
export const maxLogLineBytes = 16_384;

/** Strings in a logged error, and SQL text, are cut to this many characters. */
const maxErrorString = 2_048;
const maxListItems = 20;

function bounded(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') {
    return value.length <= maxErrorString
      ? value
      : `${value.slice(0, maxErrorString)}… [${value.length - maxErrorString} more characters]`;
  }
  if (value === null || typeof value !== 'object') return value;
  if (depth > 4) return '[nested too deep]';
  if (Array.isArray(value)) {
    const items = value.slice(0, maxListItems).map((v) => bounded(v, depth + 1));
    return value.length > maxListItems ? [...items, `… ${value.length - maxListItems} more`] : items;
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    // Bound parameters of a failed query are request data: their count is all a reader needs.
    out[k] = k === 'params' && Array.isArray(v) ? `[${v.length} parameters]` : bounded(v, depth + 1);
  }
  return out;
}

/**
 * Errors as pino serialises them, with SQL, messages and parameters cut to size, and what caused
 * them in a field of its own: a failed query's message is its SQL text first (`Failed query: …`),
 * so cut to size it had lost the database's own message (`canceling statement …`) at its end.
 */
function boundedError(error: unknown): unknown {
  if (!(error instanceof Error)) return bounded(error);
  const cause = error.cause instanceof Error ? error.cause : undefined;
  const code = (cause as { code?: unknown } | undefined)?.code;
  return bounded({
    ...pino.stdSerializers.err(error),
    message: messageWithCauses(error),
    ...(cause === undefined
      ? {}
      : {
          cause: {
            type: cause.constructor.name,
            message: messageWithCauses(cause),
            ...(typeof code === 'string' || typeof code === 'number' ? { code } : {}),
          },
        }),
  });
}

/** The last guard: a line that is still too long is replaced by a short one that says so. */
function capLine(line: string): string {
  const bytes = Buffer.byteLength(line);
  if (bytes <= maxLogLineBytes) return line;
  let fields: Record<string, unknown> = {};
  try {
    fields = JSON.parse(line) as Record<string, unknown>;
  } catch {
    // Not JSON (never with these options): keep only the head below.
  }
  const pick = (k: string) => (fields[k] === undefined ? {} : { [k]: bounded(fields[k]) });
  const short = {
    ...pick('level'),
    ...pick('time'),
    ...pick('service'),
    ...pick('reqId'),
    msg: typeof fields.msg === 'string' ? fields.msg.slice(0, 1_024) : 'log line truncated',
    truncated: true,
    original_bytes: bytes,
    head: line.slice(0, 2_048),
  };
  return `${JSON.stringify(short)}\n`;
}

/** Options every ragport logger uses: redaction, bounded errors and bounded lines. */
export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: redact, censor: '[redacted]' },
    base: { service: 'ragport' },
    serializers: { err: boundedError, error: boundedError },
    hooks: { streamWrite: capLine },
  };
}

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return destination ? pino(loggerOptions(level), destination) : pino(loggerOptions(level));
}
