/**
 * A document that cannot be parsed. The message is written for the person who uploaded the file
 * ("PDF is encrypted"), so the API can show it as is; the underlying library error is the cause.
 */
export class ParseError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ParseError';
  }
}

/** The message of an unknown thrown value, for wrapping library errors in a ParseError. */
export const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));
