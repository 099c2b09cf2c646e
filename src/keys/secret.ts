import { hash, timingSafeEqual } from 'node:crypto';
import { randomBase62 } from '../db/ids.ts';

export const KEY_PREFIX = 'rpk_';
const SECRET_LENGTH = 40;
const VISIBLE_PREFIX_LENGTH = KEY_PREFIX.length + 6;
const wellFormed = /^rpk_[0-9A-Za-z]{32,128}$/;

export const generateSecret = (): string => KEY_PREFIX + randomBase62(SECRET_LENGTH);

/** Keys carry ≥190 random bits, so a plain sha256 is as strong as a slow hash here. */
export const hashSecret = (secret: string): string => hash('sha256', secret, 'hex');

export const visiblePrefix = (secret: string): string => secret.slice(0, VISIBLE_PREFIX_LENGTH);

export const isWellFormedKey = (candidate: string): boolean => wellFormed.test(candidate);

/** Constant-time equality of two secrets' hashes (equal lengths: hex sha256), so lengths never leak. */
export function hashesEqual(a: string, b: string): boolean {
  return timingSafeEqual(Buffer.from(a, 'hex'), Buffer.from(b, 'hex'));
}
