/**
 * Server-sent events from a byte stream: yields the `data` of each event (lines joined by `\n`).
 * Comments, `event:`/`id:` fields and keep-alives are dropped; a trailing event without its
 * blank line is still delivered.
 */
export async function* sseData(body: AsyncIterable<Buffer | string>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string | undefined;
  for await (const piece of body) {
    buffer += typeof piece === 'string' ? piece : decoder.decode(piece, { stream: true });
    let start = 0;
    for (let end = buffer.indexOf('\n'); end !== -1; end = buffer.indexOf('\n', start)) {
      const line = buffer.charCodeAt(end - 1) === 13 ? buffer.slice(start, end - 1) : buffer.slice(start, end);
      start = end + 1;
      if (line === '') {
        if (data !== undefined) yield data;
        data = undefined;
      } else if (line.startsWith('data:')) {
        const value = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5);
        data = data === undefined ? value : `${data}\n${value}`;
      }
    }
    buffer = start === 0 ? buffer : buffer.slice(start);
  }
  buffer += decoder.decode();
  if (buffer.startsWith('data:')) {
    const value = buffer.charCodeAt(5) === 32 ? buffer.slice(6) : buffer.slice(5);
    data = data === undefined ? value : `${data}\n${value}`;
  }
  if (data !== undefined) yield data;
}
