import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// The shared fixtures live beside the repository (../shared/data next to the checkout): real
// documents in documents/, BEIR SciFact in scifact/. Tests and benches find them only through here.
const root = new URL('../../../shared/data/', import.meta.url);

/** The absolute path of a file or folder under the shared data, e.g. `documents/crazyones.pdf`. */
export const sharedData = (relative = ''): string => fileURLToPath(new URL(relative, root));

/** The non-empty lines of a shared text file. */
export const sharedLines = (relative: string): string[] =>
  readFileSync(sharedData(relative), 'utf8')
    .split(/\r?\n/)
    .filter((line) => line.trim() !== '');

/** A shared JSON Lines file, one value per line (e.g. `scifact/corpus.jsonl`). */
export const sharedJsonLines = <T>(relative: string): T[] => sharedLines(relative).map((line) => JSON.parse(line) as T);

/** A shared document's bytes, by its name in documents/ (e.g. `crazyones.pdf`). */
export const sharedDocument = (name: string): Uint8Array =>
  new Uint8Array(readFileSync(sharedData(`documents/${name}`)));
