export interface SseParser {
  /** Feeds a piece of the byte stream; returns the `data` of every event it completed. */
  push(piece: Buffer | string): string[];
  /** The end of the stream: a last event without its blank line is still delivered. */
  end(): string[];
}

const valueOf = (line: string) => (line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5));

/**
 * Server-sent events, incrementally: yields the `data` of each event (lines joined by `\n`).
 * Comments, `event:`/`id:` fields, keep-alives and events with empty data are dropped. Synchronous, so a chunk with
 * several events costs no extra promise per event.
 */
export function createSseParser(): SseParser {
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string | undefined;

  const lines = (done: boolean): string[] => {
    const out: string[] = [];
    let start = 0;
    for (let end = buffer.indexOf('\n'); end !== -1; end = buffer.indexOf('\n', start)) {
      const line = buffer.charCodeAt(end - 1) === 13 ? buffer.slice(start, end - 1) : buffer.slice(start, end);
      start = end + 1;
      if (line === '') {
        // An event with empty data (`data:`, a proxy's keep-alive) is not dispatched (the SSE
        // standard): relayed, it failed a healthy stream as a malformed event.
        if (data !== undefined && data !== '') out.push(data);
        data = undefined;
      } else if (line.startsWith('data:')) {
        data = data === undefined ? valueOf(line) : `${data}\n${valueOf(line)}`;
      }
    }
    buffer = start === 0 ? buffer : buffer.slice(start);
    if (done) {
      if (buffer.startsWith('data:')) data = data === undefined ? valueOf(buffer) : `${data}\n${valueOf(buffer)}`;
      if (data !== undefined && data !== '') out.push(data);
      buffer = '';
      data = undefined;
    }
    return out;
  };

  return {
    push(piece) {
      buffer += typeof piece === 'string' ? piece : decoder.decode(piece, { stream: true });
      return lines(false);
    },
    end() {
      buffer += decoder.decode();
      return lines(true);
    },
  };
}
