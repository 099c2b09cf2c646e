import { randomBytes } from 'node:crypto';

const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniform base62 string from rejection sampling, so no character is more likely than another. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += alphabet[byte % 62];
    }
  }
  return out;
}

export type IdPrefix = 'key' | 'col' | 'doc' | 'job' | 'chk' | 'bot' | 'conv' | 'msg' | 'req';

/** Prefixed opaque identifiers (`col_…`), 22 base62 characters ≈ 131 random bits. */
export const newId = (prefix: IdPrefix): string => `${prefix}_${randomBase62(22)}`;
