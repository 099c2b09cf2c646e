// `npm run worker`: a standalone ingestion worker, after the Node version check (launch.mjs).
import { launch } from './launch.mjs';

await launch(new URL('./worker.ts', import.meta.url).href, { stopWithParent: true });
