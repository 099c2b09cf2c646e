import { spawn } from 'node:child_process';
import type { PDFPageProxy } from 'pdfjs-dist/legacy/build/pdf.mjs';

import { normaliseInline } from './text-sink.ts';

/**
 * OCR of PDF pages without a text layer (scans): the page is rendered by pdfjs onto a
 * @napi-rs/canvas bitmap and read by Tesseract, run as a child of the parser process. The parent
 * resolved the binary and checked the languages (src/ingestion/ocr.ts), so nothing here reads the
 * environment.
 */
export interface OcrSettings {
  /** Absolute path of the tesseract binary. */
  binary: string;
  /** Traineddata names joined by `+`. */
  languages: string;
  /** Pages recognised per document at most. */
  maxPages: number;
  /** Time for all of one document's OCR. */
  timeoutMs: number;
  /** prlimit, when installed: bounds Tesseract's address space to `memoryMb`. */
  prlimit: string | undefined;
  memoryMb: number;
}

/** 300 dpi is what Tesseract is trained for; a page larger than A3 is scaled down to fit the pixel cap. */
const DPI = 300;
const MAX_SIDE_PX = 5_000;
/** More text than any page holds: a runaway output stops here. */
const MAX_OUTPUT_BYTES = 1_000_000;

export class OcrTimeout extends Error {}

/** Renders a page to PNG at 300 dpi (bounded in pixels). */
export async function renderPage(page: PDFPageProxy): Promise<Buffer> {
  const { createCanvas } = await import('@napi-rs/canvas');
  const base = page.getViewport({ scale: 1 });
  const scale = Math.min(DPI / 72, MAX_SIDE_PX / Math.max(base.width, base.height, 1));
  const viewport = page.getViewport({ scale });
  const canvas = createCanvas(Math.ceil(viewport.width), Math.ceil(viewport.height));
  const context = canvas.getContext('2d');
  // Scans are dark ink on paper; a transparent background would read as black.
  context.fillStyle = '#ffffff';
  context.fillRect(0, 0, canvas.width, canvas.height);
  // pdfjs types `canvas` as the browser's HTMLCanvasElement, absent without the DOM library;
  // under Node, @napi-rs/canvas is the canvas it expects.
  await page.render({ canvas, viewport }).promise;
  return canvas.toBuffer('image/png');
}

/** Runs Tesseract on one image within `timeoutMs`; killed past it. */
export function recognise(image: Buffer, settings: OcrSettings, timeoutMs: number): Promise<string> {
  const args = ['stdin', 'stdout', '-l', settings.languages, '--psm', '3'];
  const [command, argv] =
    settings.prlimit === undefined
      ? [settings.binary, args]
      : [settings.prlimit, [`--as=${settings.memoryMb * 1024 * 1024}`, '--', settings.binary, ...args]];
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, {
      // One thread: parsers already run side by side, and OpenMP threads only contend on few cores.
      env: { OMP_THREAD_LIMIT: '1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    let size = 0;
    let stderr = '';
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.stdout.on('data', (data: Buffer) => {
      size += data.length;
      if (size > MAX_OUTPUT_BYTES) child.kill('SIGKILL');
      else out.push(data);
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text: string) => {
      stderr = (stderr + text).slice(-2_000);
    });
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (timedOut) reject(new OcrTimeout('OCR time limit reached'));
      else if (code === 0) resolve(Buffer.concat(out).toString('utf8'));
      else reject(new Error(`tesseract failed (${signal ?? `exit code ${String(code)}`}): ${stderr.trim()}`));
    });
    // A page it cannot take (it died early) shows in 'close'; the write error adds nothing.
    child.stdin.on('error', () => undefined);
    child.stdin.end(image);
  });
}

/**
 * Tesseract's text as paragraphs: it separates blocks by blank lines and breaks lines where the
 * scan did; a line ending in a hyphen before a lower-case letter was one word cut in two.
 */
export function ocrParagraphs(text: string): string[] {
  return text
    .replaceAll('\f', '\n')
    .split(/\n\s*\n/)
    .map((block) => normaliseInline(block.replace(/-\n(?=\p{Ll})/gu, '').replaceAll('\n', ' ')))
    .filter((p) => p !== '');
}
