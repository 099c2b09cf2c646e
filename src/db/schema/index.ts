export * from './keys.ts';
export * from './usage.ts';
