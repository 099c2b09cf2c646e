import { describe, expect, it } from 'vitest';
import { countTextTokens, counterFor, tokenCounter } from '../../src/gateway/tokens.ts';

/**
 * Token counting runs on the event loop (a chatbot's prompt budget, the gateway's usage when an
 * upstream reports none). gpt-tokenizer's merges are quadratic in the length of a run without
 * spaces: a chatbot message of 199,998 × "a" held the server 31.8 s, 100,000 emoji 119 s.
 */
describe('token counting', () => {
  it('counts a long run without spaces in linear time, as the whole run counts', { timeout: 10_000 }, async () => {
    const count = await tokenCounter();
    // o200k counts 8 "a" as one token; the whole run of 10,000 (a second or less) says the same.
    expect(count('a'.repeat(10_000))).toBe(1_250);
    expect(count('a'.repeat(200_000))).toBe(25_000);
    expect(await countTextTokens(['a'.repeat(200_000)])).toBe(25_000);
    const emoji = '😀'.repeat(100_000);
    expect(count(emoji)).toBeGreaterThanOrEqual(100_000);
  });

  it('counts ordinary text exactly as the encoder does', async () => {
    const count = await tokenCounter();
    const prose = 'The quick brown fox jumps over the lazy dog, said 42 scientists. '.repeat(500);
    const { countTokens } = await import('gpt-tokenizer/encoding/o200k_base');
    expect(count(prose)).toBe(countTokens(prose));
    expect(await countTextTokens([prose, prose])).toBe(2 * countTokens(prose));
    // A long URL among words: only the run is cut, into slices that keep surrogate pairs whole.
    const mixed = `see https://example.com/${'x'.repeat(300)}😀${'y'.repeat(300)} and more words`;
    expect(Math.abs(count(mixed) - countTokens(mixed))).toBeLessThanOrEqual(3);
    const pairs = '😀'.repeat(1_000);
    expect(Math.abs(count(pairs) - countTokens(pairs))).toBeLessThanOrEqual(8);
  });

  it('lets other work run while it counts a long text', async () => {
    const text = 'Words of an ordinary document, counted for usage when the upstream reports none. '.repeat(60_000);
    let turns = 0;
    let counting = true;
    const tick = () => {
      turns++;
      if (counting) setImmediate(tick);
    };
    setImmediate(tick);
    const tokens = await countTextTokens([text]);
    counting = false;
    expect(tokens).toBeGreaterThan(60_000 * 10);
    // Counted on the event loop in one go, no other callback would have run until it ended.
    expect(turns).toBeGreaterThanOrEqual(2);

    turns = 0;
    counting = true;
    setImmediate(tick);
    const count = await counterFor([text, 'short']);
    counting = false;
    expect(turns).toBeGreaterThanOrEqual(2);
    expect(count(text)).toBe(tokens);
    expect(count('short')).toBe(1);
    expect(count('not counted before')).toBeGreaterThan(0);
  });
});
