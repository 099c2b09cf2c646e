import { randomFillSync } from 'node:crypto';

const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

// Every request gets an id: random bytes are drawn from the CSPRNG a few KB at a time, not with
// one buffer allocation and system call per id (2 % of the gateway's CPU at 0 ms upstream latency).
const pool = Buffer.alloc(4096);
let used = pool.length;

function randomByte(): number {
  if (used === pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  const byte = pool[used] as number;
  // API key secrets are drawn from here too: a byte handed out does not linger in the pool.
  pool[used++] = 0;
  return byte;
}

/** Uniform base62 string from rejection sampling, so no character is more likely than another. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = randomByte();
    if (byte < 248) out += alphabet[byte % 62];
  }
  return out;
}

export type IdPrefix = 'key' | 'col' | 'doc' | 'job' | 'chk' | 'bot' | 'conv' | 'msg' | 'req' | 'whk';

/** Prefixed opaque identifiers (`col_…`), 22 base62 characters ≈ 131 random bits. */
export const newId = (prefix: IdPrefix): string => `${prefix}_${randomBase62(22)}`;
