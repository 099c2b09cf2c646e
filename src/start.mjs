// `npm start`: the server, after the Node version check (launch.mjs).
import { launch } from './launch.mjs';

await launch(new URL('./server.ts', import.meta.url).href, { stopWithParent: true });
