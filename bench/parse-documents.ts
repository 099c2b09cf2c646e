/**
 * Parse time and peak RSS per shared document: `node bench/parse-documents.ts [dir]`.
 * Each file is parsed in a fresh process so that peak RSS belongs to that file alone. It is parsed
 * twice: the first ("cold") time includes loading the parser modules on first use (pdfjs is
 * large), the second ("warm") is what a busy worker sees.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { detectFormat, parseDocument } from '../src/ingestion/parsers/index.ts';
import { sharedData } from '../test/support/fixtures.ts';

const defaultDir = sharedData('documents/');

async function measure(path: string): Promise<void> {
  const bytes = new Uint8Array(readFileSync(path));
  const format = detectFormat(path, undefined, bytes.subarray(0, 16));
  if (format === undefined) throw new Error(`unsupported: ${path}`);
  const timed = async (): Promise<{ ms: number; chars: number }> => {
    const started = performance.now();
    const { text } = await parseDocument(bytes, format);
    return { ms: Math.round(performance.now() - started), chars: text.length };
  };
  const cold = await timed();
  const warm = await timed();
  const peakRssMb = Math.round(process.resourceUsage().maxRSS / 1024);
  console.log(JSON.stringify({ format, coldMs: cold.ms, warmMs: warm.ms, peakRssMb, chars: warm.chars }));
}

async function main(): Promise<void> {
  const [arg] = process.argv.slice(2);
  if (arg !== undefined && !arg.endsWith('/')) return measure(arg);
  const dir = arg ?? defaultDir;
  const baseline = execFileSync(process.execPath, ['-e', 'console.log(process.resourceUsage().maxRSS)']);
  console.log(`bare node peak RSS: ${Math.round(Number(baseline) / 1024)} MB`);
  console.log('| file | format | cold ms | warm ms | peak RSS MB | chars |\n|---|---|---|---|---|---|');
  for (const name of readdirSync(dir).sort()) {
    if (name.endsWith('SOURCES.md')) continue;
    const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), dir + name], { encoding: 'utf8' });
    const row = JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as Record<string, string | number>;
    const cells = [name, row.format, row.coldMs, row.warmMs, row.peakRssMb, row.chars];
    console.log(`| ${cells.map(String).join(' | ')} |`);
  }
}

await main();
