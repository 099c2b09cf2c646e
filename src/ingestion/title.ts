/**
 * Contextual chunk headers. A chunk from the middle of a document rarely names its subject, so
 * each chunk is embedded and indexed for BM25 as `title + chunk` (the stored content, offsets and
 * results stay the chunk alone). The title is `metadata.title` when the upload gives one, else
 * the document's first line when it stands alone (a blank line after it) and is short, which is
 * where titles sit in plain text, Markdown (`# …`), the HTML parser's output and most PDFs.
 */
const MAX_TITLE_CHARS = 200;

export function documentTitle(metadata: Record<string, unknown> | null, text: string): string | undefined {
  const given = metadata?.title;
  if (typeof given === 'string' && given.trim() !== '') return clip(given.trim().replace(/\s+/g, ' '));
  const first = /^\s*([^\n]+?)[ \t]*\r?\n[ \t]*\r?\n/.exec(text.slice(0, 4 * MAX_TITLE_CHARS));
  const line = first?.[1]?.replace(/^#{1,6}\s+/, '').trim() ?? '';
  return line !== '' && line.length <= MAX_TITLE_CHARS ? line : undefined;
}

/** What the retrieval legs see of a chunk: the title first, unless the chunk opens with it. */
export function withTitle(title: string | undefined, content: string): string {
  if (title === undefined || content.slice(0, title.length + 16).includes(title)) return content;
  return `${title}\n\n${content}`;
}

function clip(title: string): string {
  if (title.length <= MAX_TITLE_CHARS) return title;
  const cut = title.slice(0, MAX_TITLE_CHARS);
  const space = cut.lastIndexOf(' ');
  return space > MAX_TITLE_CHARS / 2 ? cut.slice(0, space) : cut;
}
