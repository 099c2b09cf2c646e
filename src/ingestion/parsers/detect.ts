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

const utf16Bom = (head: Uint8Array): boolean => startsWith(head, [0xff, 0xfe]) || startsWith(head, [0xfe, 0xff]);

/** NUL bytes do not occur in UTF-8 text; they mark executables, images and archives. */
const looksBinary = (head: Uint8Array): boolean => !utf16Bom(head) && head.includes(0);

function fromName(fileName: string): DocumentFormat | undefined {
  const base = fileName.split(/[/\\]/).pop()?.toLowerCase() ?? '';
  if (codeFileNames.has(base)) return 'code';
  const dot = base.lastIndexOf('.');
  if (dot <= 0 && !base.startsWith('.')) return undefined;
  const ext = base.slice(dot + 1);
  return byExtension[ext] ?? (codeExtensions.has(ext) ? 'code' : undefined);
}

function fromContentType(contentType: string | undefined): DocumentFormat | undefined {
  const type = contentType?.split(';')[0]?.trim().toLowerCase();
  return type === undefined ? undefined : byContentType[type];
}

/**
 * Decides the format from the file name extension and the declared content type, and sniffs magic
 * bytes (%PDF, PK zip) so a mismatched content type is handled; returns undefined for unsupported
 * formats (the API answers 415). The bytes win over the labels: browsers and curl often send
 * `application/octet-stream` or a type guessed from a wrong extension. A zip is only taken as a
 * DOCX when a label says so, since a zip could be anything (xlsx, jar, epub).
 */
export function detectFormat(
  fileName: string,
  contentType: string | undefined,
  head: Uint8Array,
): DocumentFormat | undefined {
  const named = fromName(fileName);
  const declared = fromContentType(contentType);
  if (startsWith(head, pdfMagic)) return 'pdf';
  if (startsWith(head, zipMagic)) return named === 'docx' || declared === 'docx' ? 'docx' : undefined;
  // A binary label on text bytes (or the reverse) cannot be parsed as labelled.
  const candidate = named ?? declared;
  if (candidate === 'pdf' || candidate === 'docx' || looksBinary(head)) return undefined;
  if (candidate !== undefined) return candidate;
  // text/* of an unknown flavour (text/x-python, text/x-c) is still readable text.
  return contentType?.trim().toLowerCase().startsWith('text/') === true ? 'txt' : undefined;
}
