import { createHash, timingSafeEqual } from 'node:crypto';
import { randomBase62 } from '../db/ids.ts';

export const KEY_PREFIX = 'rpk_';
const SECRET_LENGTH = 40;
const VISIBLE_PREFIX_LENGTH = KEY_PREFIX.length + 6;
const wellFormed = /^rpk_[0-9A-Za-z]{32,128}$/;

export const generateSecret = (): string => KEY_PREFIX + randomBase62(SECRET_LENGTH);

/** Keys carry ≥190 random bits, so a plain sha256 is as strong as a slow hash here. */
export const hashSecret = (secret: string): string => createHash('sha256').update(secret).digest('hex');

export const visiblePrefix = (secret: string): string => secret.slice(0, VISIBLE_PREFIX_LENGTH);

export const isWellFormedKey = (candidate: string): boolean => wellFormed.test(candidate);

/** Constant-time equality of two secrets, compared through their hashes so lengths never leak. */
export function secretsEqual(a: string, b: string): boolean {
  return timingSafeEqual(Buffer.from(hashSecret(a), 'hex'), Buffer.from(hashSecret(b), 'hex'));
}
