import { z } from 'zod';

/** Collection names: 1–64 characters of [A-Za-z0-9_.-], starting alphanumeric (contract). */
export const collectionNamePattern = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

export const collectionName = z
  .string()
  .regex(collectionNamePattern, 'must be 1-64 characters of A-Z a-z 0-9 _ . - starting with a letter or digit');
