import { pino, type Logger } from 'pino';

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

export function createLogger(level: string): Logger {
  return pino({ level, redact: { paths: redact, censor: '[redacted]' }, base: { service: 'ragport' } });
}
