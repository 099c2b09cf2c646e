import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import type { OcrConfig } from '../config.ts';
import type { OcrSettings } from './parsers/ocr.ts';

const run = promisify(execFile);

/** Whether OCR of scanned PDF pages is on in this process, and why (for the start-up log and /readyz). */
export interface OcrStatus {
  /** The settings parsers get; undefined when OCR is off. */
  settings: OcrSettings | undefined;
  /** false only for a misconfiguration (languages asked for that are not installed). */
  ok: boolean;
  detail: string;
}

/** An executable on the PATH: parser processes get no environment, so they are given its full path. */
function findOnPath(name: string, path: string | undefined): string | undefined {
  for (const dir of (path ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * Looks for Tesseract and its installed languages. OCR is on when the binary is present, every
 * configured language is installed, and the page cap is above 0.
 */
export async function probeOcr(
  config: OcrConfig | undefined,
  memoryMb: number,
  path = process.env.PATH,
): Promise<OcrStatus> {
  if (config === undefined || config.maxPages === 0) return { settings: undefined, ok: true, detail: 'off' };
  const binary = findOnPath('tesseract', path);
  if (binary === undefined) {
    return {
      settings: undefined,
      ok: true,
      detail: 'off: tesseract is not installed (scanned PDF pages give no text)',
    };
  }
  let installed: string[];
  try {
    // It lists to stdout after a header line naming the tessdata directory.
    const { stdout } = await run(binary, ['--list-langs'], { timeout: 10_000, env: {} });
    installed = stdout
      .split('\n')
      .slice(1)
      .map((l) => l.trim())
      .filter((l) => l !== '');
  } catch (error) {
    return { settings: undefined, ok: false, detail: `off: ${binary} --list-langs failed (${String(error)})` };
  }
  const missing = config.languages.split('+').filter((l) => !installed.includes(l));
  if (missing.length > 0) {
    return {
      settings: undefined,
      ok: false,
      detail: `off: OCR_LANGUAGES names ${missing.join(', ')}, not installed (installed: ${installed.join(', ') || 'none'})`,
    };
  }
  const version = await tesseractVersion(binary);
  return {
    settings: {
      binary,
      languages: config.languages,
      maxPages: config.maxPages,
      timeoutMs: config.timeoutMs,
      prlimit: findOnPath('prlimit', path),
      memoryMb,
    },
    ok: true,
    detail: `tesseract ${version}, languages ${config.languages}, at most ${config.maxPages} pages and ${config.timeoutMs / 1000} s per document`,
  };
}

async function tesseractVersion(binary: string): Promise<string> {
  const { stdout } = await run(binary, ['--version'], { timeout: 10_000, env: {} }).catch(() => ({ stdout: '' }));
  return /tesseract\s+(\S+)/i.exec(stdout)?.[1] ?? 'unknown version';
}
