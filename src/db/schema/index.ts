export * from './chunks.ts';
export * from './collections.ts';
export * from './documents.ts';
export * from './jobs.ts';
export * from './keys.ts';
export * from './terms.ts';
export * from './usage.ts';
