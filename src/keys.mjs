// `npm run keys`: the keys CLI, after the Node version check (launch.mjs).
import { launch } from './launch.mjs';

await launch(new URL('./keys/keys.cli.ts', import.meta.url).href);
