import { describe, expect, it } from 'vitest';
import { knownContextWindow } from '../../src/chatbots/context-windows.ts';

describe('context windows of well-known chat models', () => {
  it('by name, dated or variant name, or provider-prefixed name; the longest match wins', () => {
    expect(knownContextWindow('gpt-4o-mini')).toBe(128_000);
    expect(knownContextWindow('gpt-4o-mini-2024-07-18')).toBe(128_000);
    expect(knownContextWindow('openai/gpt-4o')).toBe(128_000);
    expect(knownContextWindow('gpt-4')).toBe(8_192);
    expect(knownContextWindow('gpt-4-0613')).toBe(8_192);
    expect(knownContextWindow('gpt-4-turbo-2024-04-09')).toBe(128_000);
    expect(knownContextWindow('gpt-4.1-mini')).toBe(1_047_576);
    expect(knownContextWindow('o1-mini')).toBe(128_000);
    expect(knownContextWindow('o3-mini')).toBe(200_000);
    expect(knownContextWindow('anthropic/claude-3-5-sonnet-latest')).toBe(200_000);
    expect(knownContextWindow('gemini-2.0-flash')).toBe(1_048_576);
    expect(knownContextWindow('llama-3.1-8b-instant')).toBe(131_072);
  });

  it('nothing for a name it does not know, nor for one that only starts like a known one', () => {
    expect(knownContextWindow('mock-chat')).toBeUndefined();
    expect(knownContextWindow('gpt-4omega')).toBeUndefined();
    expect(knownContextWindow('o10')).toBeUndefined();
  });
});
