import { describe, expect, it } from 'vitest';
import { knownContextWindow } from '../../src/chatbots/context-windows.ts';

describe('context windows of well-known chat models', () => {
  // By name, dated or variant name, or provider-prefixed name; the longest match wins.
  it.each([
    ['gpt-4o-mini', 128_000],
    ['gpt-4o-mini-2024-07-18', 128_000],
    ['openai/gpt-4o', 128_000],
    ['gpt-4', 8_192],
    ['gpt-4-0613', 8_192],
    ['gpt-4-turbo-2024-04-09', 128_000],
    ['gpt-4.1-mini', 1_047_576],
    ['o1-mini', 128_000],
    ['o3-mini', 200_000],
    ['anthropic/claude-3-5-sonnet-latest', 200_000],
    ['gemini-2.0-flash', 1_048_576],
    ['llama-3.1-8b-instant', 131_072],
  ])('%s: %i tokens', (name, window) => {
    expect(knownContextWindow(name)).toBe(window);
  });

  it.each(['mock-chat', 'gpt-4omega', 'o10'])(
    'nothing for %s: a name it does not know, or one that only starts like a known one',
    (name) => {
      expect(knownContextWindow(name)).toBeUndefined();
    },
  );
});
