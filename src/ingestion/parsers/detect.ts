import type { DocumentFormat } from './types.ts';

/** Source code and configuration files, indexed as plain text with their layout kept. */
const codeExtensions = new Set([
  'ts',
  'tsx',
  'mts',
  'cts',
  'js',
  'jsx',
  'mjs',
  'cjs',
  'py',
  'pyi',
  'go',
  'rs',
  'java',
  'c',
  'h',
  'cc',
  'cpp',
  'cxx',
  'hpp',
  'hh',
  'hxx',
  'cs',
  'rb',
  'php',
  'swift',
  'kt',
  'kts',
  'scala',
  'sc',
  'sh',
  'bash',
  'zsh',
  'fish',
  'ps1',
  'sql',
  'yaml',
  'yml',
  'toml',
  'ini',
  'cfg',
  'conf',
  'xml',
  'css',
  'scss',
  'sass',
  'less',
  'vue',
  'svelte',
  'lua',
  'pl',
  'pm',
  'r',
  'jl',
  'dart',
  'ex',
  'exs',
  'erl',
  'hs',
  'ml',
  'mli',
  'fs',
  'fsx',
  'clj',
  'cljs',
  'elm',
  'zig',
  'nim',
  'm',
  'mm',
  'groovy',
  'gradle',
  'tf',
  'hcl',
  'proto',
  'graphql',
  'gql',
  'dockerfile',
  'mk',
  'cmake',
  'bat',
  'ipynb',
]);

const byExtension: Record<string, DocumentFormat> = {
  txt: 'txt',
  text: 'txt',
  log: 'txt',
  rst: 'txt',
  md: 'md',
  markdown: 'md',
  mdx: 'md',
  html: 'html',
  htm: 'html',
  xhtml: 'html',
  pdf: 'pdf',
  docx: 'docx',
  csv: 'csv',
  json: 'json',
  jsonl: 'jsonl',
  ndjson: 'jsonl',
};

const byContentType: Record<string, DocumentFormat> = {
  'text/plain': 'txt',
  'text/markdown': 'md',
  'text/x-markdown': 'md',
  'text/html': 'html',
  'application/xhtml+xml': 'html',
  'application/pdf': 'pdf',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'docx',
  'text/csv': 'csv',
  'application/json': 'json',
  'application/jsonl': 'jsonl',
  'application/x-ndjson': 'jsonl',
  'application/ndjson': 'jsonl',
  'application/x-jsonlines': 'jsonl',
};

/** Names without an extension that are still code (build files). */
const codeFileNames = new Set(['dockerfile', 'makefile', 'gemfile', 'rakefile', 'jenkinsfile']);

const startsWith = (head: Uint8Array, magic: readonly number[]): boolean => magic.every((byte, i) => head[i] === byte);

const pdfMagic = [0x25, 0x50, 0x44, 0x46, 0x2d]; // "%PDF-"
const zipMagic = [0x50, 0x4b, 0x03, 0x04]; // "PK\3\4"

/** How many leading bytes detection looks at: PDF readers accept the header anywhere in the first 1,024. */
export const sniffBytes = 1024;

/**
 * "%PDF-" at the start or, for a file labelled PDF, after some junk within the first kilobyte (as
 * PDF readers allow; a text file may well mention "%PDF-").
 */
function isPdf(head: Uint8Array, labelled: boolean): boolean {
  if (startsWith(head, pdfMagic)) return true;
  if (!labelled) return false;
  const window = head.subarray(0, sniffBytes);
  for (let i = window.indexOf(0x25); i >= 0; i = window.indexOf(0x25, i + 1)) {
    if (startsWith(window.subarray(i), pdfMagic)) return true;
  }
  return false;
}

const utf16Bom = (head: Uint8Array): boolean => startsWith(head, [0xff, 0xfe]) || startsWith(head, [0xfe, 0xff]);

/** NUL bytes do not occur in UTF-8 text; they mark executables, images and archives. */
const looksBinary = (head: Uint8Array): boolean => !utf16Bom(head) && head.subarray(0, sniffBytes).includes(0);

const baseName = (fileName: string): string => fileName.split(/[/\\]/).pop()?.toLowerCase() ?? '';

/** Whether the name ends in an extension (`notes.txt`, `.env`), not `README` or `notes.`. */
function hasExtension(fileName: string): boolean {
  const base = baseName(fileName);
  const dot = base.lastIndexOf('.');
  return dot >= 0 && dot < base.length - 1;
}

function fromName(fileName: string): DocumentFormat | undefined {
  const base = baseName(fileName);
  if (codeFileNames.has(base)) return 'code';
  const dot = base.lastIndexOf('.');
  if (dot <= 0 && !base.startsWith('.')) return undefined;
  const ext = base.slice(dot + 1);
  return byExtension[ext] ?? (codeExtensions.has(ext) ? 'code' : undefined);
}

/** The media type of a Content-Type, lower case, without its parameters. */
const mediaType = (contentType: string | undefined): string | undefined => {
  const type = contentType?.split(';')[0]?.trim().toLowerCase();
  return type === '' ? undefined : type;
};

function fromContentType(contentType: string | undefined): DocumentFormat | undefined {
  const type = mediaType(contentType);
  return type === undefined ? undefined : byContentType[type];
}

export type Detection = { ok: true; format: DocumentFormat } | { ok: false; message: string };

const supported = 'use txt, md, html, pdf, docx, csv, json, jsonl or source code';

const docxType = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

/**
 * Decides the format from the file name extension and the declared content type, and sniffs the
 * leading bytes (%PDF, PK zip, NUL) so a mismatched label is caught; an unsupported or mismatched
 * file gets a message for the API's 415. The bytes win over the labels when they are a format of
 * their own: browsers and curl often send `application/octet-stream` or a type guessed from a
 * wrong extension. A zip is only taken as a DOCX when a label says so, since a zip could be
 * anything (xlsx, jar, epub); a file that either label, its name or its content type, calls PDF
 * or DOCX while its bytes are not one is refused rather than read as text.
 */
export function classifyUpload(fileName: string, contentType: string | undefined, head: Uint8Array): Detection {
  const named = fromName(fileName);
  const declared = fromContentType(contentType);
  const quoted = `'${fileName}'`;
  if (isPdf(head, named === 'pdf' || declared === 'pdf')) return { ok: true, format: 'pdf' };
  if (startsWith(head, zipMagic)) {
    if (named === 'docx' || declared === 'docx') return { ok: true, format: 'docx' };
    const asDocx = `a DOCX must be named .docx (or sent as Content-Type ${docxType})`;
    // Named as another format ragport reads: most likely a DOCX saved or sent under a wrong name.
    if (named !== undefined) {
      return {
        ok: false,
        message: `${quoted} is a zip archive, but its name says ${named}: ${asDocx}; other archives are not supported`,
      };
    }
    return {
      ok: false,
      message: `Unsupported file type ${quoted}: a zip archive is read only as a DOCX (${asDocx}); ${supported}`,
    };
  }
  // Which label said so, for the message: the name speaks for itself, a content type is quoted.
  const labelled = (format: DocumentFormat) =>
    named === format ? '' : ` (Content-Type ${mediaType(contentType) ?? ''})`;
  if (named === 'pdf' || declared === 'pdf') {
    return {
      ok: false,
      message: `${quoted} is labelled PDF${labelled('pdf')} but is not one: its content does not start with %PDF-`,
    };
  }
  if (named === 'docx' || declared === 'docx') {
    return {
      ok: false,
      message: `${quoted} is labelled DOCX${labelled('docx')} but is not one: its content is not a zip archive`,
    };
  }
  if (looksBinary(head)) {
    return { ok: false, message: `Unsupported file type ${quoted}: its content is binary, not text; ${supported}` };
  }
  const candidate = named ?? declared;
  if (candidate !== undefined) return { ok: true, format: candidate };
  // text/* of an unknown flavour (text/x-python, text/x-c) is still readable text.
  if (mediaType(contentType)?.startsWith('text/') === true) return { ok: true, format: 'txt' };
  // A name with no extension at all (README, LICENSE, NOTES) names no format: its content,
  // which is text, decides. An extension ragport does not read (.png, .xlsx) still does.
  if (!hasExtension(fileName)) return { ok: true, format: 'txt' };
  return { ok: false, message: `Unsupported file type ${quoted}: ${supported}` };
}

/** The content type recorded for each format, unless the upload's own names that format. */
const contentTypeOfFormat: Record<DocumentFormat, string> = {
  txt: 'text/plain',
  md: 'text/markdown',
  html: 'text/html',
  pdf: 'application/pdf',
  docx: docxType,
  csv: 'text/csv',
  json: 'application/json',
  jsonl: 'application/jsonl',
  code: 'text/plain',
};

/**
 * The content type to record: that of the format the document is parsed as. The declared one is
 * kept when it names that format (`text/x-markdown` for Markdown), and for plain text and source
 * code, which are read alike, when it is a text/* type of no other format (`text/x-python`).
 * Otherwise it is not what was ingested: curl and many clients label every file
 * `application/octet-stream`, and a label the bytes or the name overruled (a PDF sent as
 * text/plain, notes.md as text/plain) would misdescribe the document.
 */
export function contentTypeOf(declared: string | undefined, format: DocumentFormat): string {
  const type = mediaType(declared);
  if (type === undefined) return contentTypeOfFormat[format];
  const names = byContentType[type];
  const text = (format === 'txt' || format === 'code') && type.startsWith('text/') && names === undefined;
  return names === format || text ? (declared as string) : contentTypeOfFormat[format];
}

/** The format of an upload, or undefined when it is unsupported or mismatched (see classifyUpload). */
export function detectFormat(
  fileName: string,
  contentType: string | undefined,
  head: Uint8Array,
): DocumentFormat | undefined {
  const detection = classifyUpload(fileName, contentType, head);
  return detection.ok ? detection.format : undefined;
}
