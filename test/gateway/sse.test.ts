import { describe, expect, it } from 'vitest';
import { createSseParser } from '../../src/gateway/providers/openai-compatible/sse.ts';

const parse = (pieces: (string | Buffer)[]) => {
  const parser = createSseParser();
  return [...pieces.flatMap((p) => parser.push(p)), ...parser.end()];
};

describe('SSE parsing of upstream streams', () => {
  it('reads data lines with or without the space, CRLF or LF, dropping comments and other fields', () => {
    expect(
      parse([': keep-alive\n\nevent: message\nid: 1\ndata: {"a":1}\n\ndata:{"b":2}\r\n\r\ndata: [DONE]\n\n']),
    ).toEqual(['{"a":1}', '{"b":2}', '[DONE]']);
  });

  it('joins multi-line data and survives events and UTF-8 characters split across pieces', () => {
    const bytes = Buffer.from('data: {"t":"é"}\n\ndata: line1\ndata: line2\n\n');
    const pieces = [bytes.subarray(0, 13), bytes.subarray(13, 14), bytes.subarray(14, 30), bytes.subarray(30)];
    expect(parse(pieces)).toEqual(['{"t":"é"}', 'line1\nline2']);
  });

  it('drops events with empty data, as the standard says (a proxy keep-alive `data:` failed a healthy stream)', () => {
    expect(parse(['data: {"a":1}\n\ndata: \n\ndata:\r\n\r\ndata: {"b":2}\n\ndata:'])).toEqual(['{"a":1}', '{"b":2}']);
  });

  it('delivers a last event that lacks its blank line', () => {
    expect(parse(['data: {"x":1}\n\ndata: {"y":2}'])).toEqual(['{"x":1}', '{"y":2}']);
  });
});
