import { pino, type DestinationStream, type Logger } from 'pino';

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
    text = text === '' || message.includes(text) ? message : `${text}: ${message}`;
  }
  return text;
}

const errSerializer = (error: Error) => ({ ...pino.stdSerializers.err(error), message: messageWithCauses(error) });

/** ragport's logger: JSON lines on stdout, or on `destination` (tests keep them). */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    redact: { paths: redact, censor: '[redacted]' },
    base: { service: 'ragport' },
    serializers: { err: errSerializer },
  };
  return destination === undefined ? pino(options) : pino(options, destination);
}
