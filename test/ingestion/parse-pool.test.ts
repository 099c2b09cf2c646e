import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { createParsePool, ParserCrashed, type ParsePool } from '../../src/ingestion/parse-pool.ts';
import { parseDocument, ParseError } from '../../src/ingestion/parsers/index.ts';
import { createLogger } from '../../src/logging.ts';
import { alive, childPids, descendantPids, nicenessOf, parserPids } from '../support/processes.ts';
import { enc, pdfSlowPages, pdfStreamBomb } from '../support/files.ts';
import { sharedDocument } from '../support/fixtures.ts';
import { until } from '../support/poll.ts';

const waitFor = (condition: () => boolean, what: string, timeoutMs = 10_000) => until(what, condition, { timeoutMs });

let pool: ParsePool | undefined;
const open = (options: Partial<Parameters<typeof createParsePool>[0]> = {}) => {
  pool = createParsePool({
    concurrency: 1,
    timeoutMs: 60_000,
    memoryMb: 1024,
    logger: createLogger('silent'),
    ...options,
  });
  return pool;
};
afterEach(async () => {
  await pool?.close();
  pool = undefined;
  expect(parserPids()).toEqual([]);
});

describe('parse pool', () => {
  it('parses in a child process exactly as in process, and reuses the process', async () => {
    const bytes = sharedDocument('multi-column-2p.pdf');
    const parsers = open();
    const inProcess = await parseDocument(bytes, 'pdf');
    expect(await parsers.parse(bytes, 'pdf', {})).toEqual(inProcess);
    const [pid] = parserPids();
    expect(pid).toBeGreaterThan(0);
    expect((await parsers.parse(enc('a,b\n1,2'), 'csv', {})).text).toBe('a: 1\nb: 2');
    expect(parserPids()).toEqual([pid]);
    // Forked by the spawner, not by this process (whose event loop a fork would block).
    expect(childPids()).not.toContain(pid);
    // Ingestion work, yielding the cores to requests like the bulk lane's model threads.
    expect(nicenessOf(pid as number)).toBe(10);
  });

  it("reports the parser's own error as a ParseError, and keeps the process", async () => {
    const parsers = open();
    const error = await parsers.parse(enc('not a zip'), 'docx', {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ParseError);
    expect((error as Error).message).toBe('DOCX is not a valid zip archive');
    expect(parserPids()).toHaveLength(1);
  });

  it('stops a parse that takes too long, as a ParseError, and the next parse gets a new process', async () => {
    const parsers = open({ timeoutMs: 1_500 });
    await expect(parsers.parse(enc('warm up'), 'txt', {})).resolves.toMatchObject({ text: 'warm up' });
    const [first] = parserPids();
    const error = await parsers.parse(pdfSlowPages(), 'pdf', {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ParseError);
    expect((error as Error).message).toBe(
      "Parsing stopped after 1.5 s (the server's time limit): the file is too large or too complex to read",
    );
    await expect(parsers.parse(enc('after'), 'txt', {})).resolves.toMatchObject({ text: 'after' });
    expect(parserPids()).not.toContain(first);
  });

  it('stops a parse that needs too much memory, buffers included, as a ParseError', async () => {
    const parsers = open({ memoryMb: 300 });
    // 400 kB that inflate to 400 MB of ArrayBuffers, outside the JS heap.
    const bomb = pdfStreamBomb(400);
    expect(bomb.length).toBeLessThan(1024 * 1024);
    const error = await parsers.parse(bomb, 'pdf', {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ParseError);
    expect((error as Error).message).toMatch(/^Parsing stopped: reading the file needed more than 300 MB of memory/);
  });

  it('stops a parse whose objects outgrow the heap the same way', async () => {
    const parsers = open({ memoryMb: 200 });
    // 40 MB of tiny JSON objects: about 4 million of them once parsed, far past a 200 MB heap.
    const objects = enc(`[${'{"a":[1]},'.repeat(4_000_000)}{"a":[1]}]`);
    const error = await parsers.parse(objects, 'json', {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ParseError);
    expect((error as Error).message).toMatch(/^Parsing stopped: reading the file needed more than 200 MB of memory/);
  });

  it('reports a parser process killed from outside as a crash, which is worth retrying', async () => {
    const parsers = open();
    await parsers.parse(enc('warm up'), 'txt', {});
    const parse = parsers.parse(pdfSlowPages(), 'pdf', {});
    process.kill(parserPids()[0] as number, 'SIGKILL');
    const error = await parse.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ParserCrashed);
    expect((error as Error).message).toBe('The parser process stopped unexpectedly (signal SIGKILL)');
  });

  it('a process spawner killed mid-parse fails the parse as a crash; the next parse gets a new spawner', async () => {
    const parsers = open();
    await parsers.parse(enc('warm up'), 'txt', {});
    const [spawner] = childPids(process.pid, 'spawner-process.mjs');
    const parse = parsers.parse(pdfSlowPages(), 'pdf', {});
    process.kill(spawner as number, 'SIGKILL');
    const error = await parse.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ParserCrashed);
    expect((error as Error).message).toBe('The parser process stopped unexpectedly (signal SIGKILL)');
    await expect(parsers.parse(enc('after'), 'txt', {})).resolves.toMatchObject({ text: 'after' });
    expect(childPids(process.pid, 'spawner-process.mjs')).not.toContain(spawner);
  });

  it('an aborted parse ends at once with the reason, its process killed', async () => {
    const parsers = open();
    const controller = new AbortController();
    const parse = parsers.parse(pdfSlowPages(), 'pdf', {}, controller.signal);
    await waitFor(() => parserPids().length === 1, 'the parser process');
    controller.abort(new Error('lease lost'));
    await expect(parse).rejects.toThrow('lease lost');
    await waitFor(() => parserPids().length === 0, 'the parser process to go');
  });

  it('runs at most `concurrency` parser processes; more parses wait', async () => {
    const parsers = open({ concurrency: 2, timeoutMs: 3_000 });
    const parses = [1, 2, 3].map(() => parsers.parse(pdfSlowPages(), 'pdf', {}).catch((e: unknown) => e));
    await waitFor(() => parserPids().length === 2, 'two parser processes');
    let most = 0;
    const watch = setInterval(() => (most = Math.max(most, parserPids().length)), 100);
    const results = await Promise.all(parses);
    clearInterval(watch);
    expect(most).toBe(2);
    for (const result of results) expect(result).toBeInstanceOf(ParseError);
  });

  it('parser processes exit when their parent dies', async () => {
    const script = `
      import { createParsePool } from './src/ingestion/parse-pool.ts';
      import { createLogger } from './src/logging.ts';
      import { pdfSlowPages } from './test/support/files.ts';
      const pool = createParsePool({ concurrency: 1, timeoutMs: 60_000, memoryMb: 1024, logger: createLogger('silent') });
      void pool.parse(pdfSlowPages(), 'pdf', {});
      setInterval(() => {}, 1000);`;
    const parent = spawn(process.execPath, ['--input-type=module', '-e', script], {
      cwd: new URL('../../', import.meta.url),
      stdio: 'ignore',
    });
    const parsers = () => descendantPids(parent.pid, 'parse-process.ts');
    await waitFor(() => parsers().length === 1, 'the parser process');
    const [orphan] = parsers();
    const [spawner] = childPids(parent.pid, 'spawner-process.mjs');
    parent.kill('SIGKILL');
    await waitFor(() => !alive(orphan as number), 'the orphaned parser process to exit');
    await waitFor(() => !alive(spawner as number), 'the orphaned spawner to exit');
  });
});
