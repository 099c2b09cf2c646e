/**
 * The nesting check every JSON body passes before it is parsed (src/json-nesting.ts): strings are
 * skipped to their closing quote, so brackets inside them never count, whatever escapes they hold.
 * Checked against the character-by-character walk it replaced, on random texts built from the
 * characters that matter.
 */
import { describe, expect, it } from 'vitest';
import { nestsDeeperThan } from '../../src/json-nesting.ts';
import { seededRandom } from '../support/random.ts';

/** The walk it replaced: a backslash inside a string skips the next character. */
function reference(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i += 1;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') {
      depth += 1;
      if (depth > max) return true;
    } else if (c === '}' || c === ']') depth -= 1;
  }
  return false;
}

describe('nestsDeeperThan', () => {
  it('counts arrays and objects, not brackets inside strings', () => {
    expect(nestsDeeperThan('[[[1]]]', 3)).toBe(false);
    expect(nestsDeeperThan('[[[[1]]]]', 3)).toBe(true);
    expect(nestsDeeperThan('{"a":{"b":[1]}}', 3)).toBe(false);
    expect(nestsDeeperThan('{"a":{"b":[{}]}}', 3)).toBe(true);
    expect(nestsDeeperThan(JSON.stringify({ text: '[[[[[[{{{{' }), 1)).toBe(false);
    // Siblings do not add up.
    expect(nestsDeeperThan('[[1],[2],[3],[4]]', 2)).toBe(false);
  });

  it('ends a string only at a quote preceded by an even number of backslashes', () => {
    // "a\"[[[" is one string: the escaped quote does not end it.
    expect(nestsDeeperThan(JSON.stringify(['a"[[[', 1]), 1)).toBe(false);
    // "a\\" ends after the escaped backslash: the brackets after it count.
    expect(nestsDeeperThan('["a\\\\",[[1]]]', 2)).toBe(true);
    expect(nestsDeeperThan('["a\\\\\\"[[[[",1]', 1)).toBe(false);
    expect(nestsDeeperThan(JSON.stringify(['\\'.repeat(7) + '"[[[', '"'.repeat(5)]), 1)).toBe(false);
  });

  it('does not count past an unterminated string', () => {
    expect(nestsDeeperThan('[["abc [[[[[[', 2)).toBe(false);
    expect(nestsDeeperThan('[[["abc', 2)).toBe(true);
  });

  it('agrees with the character-by-character walk on random texts', () => {
    const rand = seededRandom(14);
    const alphabet = ['[', ']', '{', '}', '"', '\\', 'a', ',', ':', ' '];
    for (let n = 0; n < 20_000; n++) {
      const length = 1 + Math.floor(rand() * 40);
      let text = '';
      for (let i = 0; i < length; i++) text += alphabet[Math.floor(rand() * alphabet.length)];
      const max = Math.floor(rand() * 4);
      expect(nestsDeeperThan(text, max), `${JSON.stringify(text)} ${max}`).toBe(reference(text, max));
    }
  });

  it('agrees on real JSON with long strings', () => {
    const body = JSON.stringify({
      name: 'big.md',
      content: 'lorem "ipsum" \\ [dolor] {sit} amet\n'.repeat(20_000),
      metadata: { a: { b: { c: [1, [2, [3]]] } } },
    });
    for (const max of [3, 4, 5, 6]) expect(nestsDeeperThan(body, max)).toBe(reference(body, max));
  });
});
