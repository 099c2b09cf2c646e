const named: Record<string, string> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: ' ',
  hellip: '…',
  mdash: '—',
  ndash: '–',
  lsquo: '‘',
  rsquo: '’',
  ldquo: '“',
  rdquo: '”',
  laquo: '«',
  raquo: '»',
  middot: '·',
  copy: '©',
  reg: '®',
  trade: '™',
};

function codePoint(n: number, original: string): string {
  return Number.isInteger(n) && n > 0 && n <= 0x10ffff && !(n >= 0xd800 && n <= 0xdfff)
    ? String.fromCodePoint(n)
    : original;
}

/** Decodes the entities search APIs put in snippets; unknown names are left as they are. */
export function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (whole, ref: string) => {
    if (ref[0] === '#') {
      const hex = ref[1] === 'x' || ref[1] === 'X';
      return codePoint(Number.parseInt(ref.slice(hex ? 2 : 1), hex ? 16 : 10), whole);
    }
    return named[ref.toLowerCase()] ?? whole;
  });
}

/**
 * Snippet text from the HTML fragments providers return (Brave wraps matches in <strong>):
 * tags and comments removed, then entities decoded, so an encoded `&lt;b&gt;` stays literal text.
 */
export function stripHtml(html: string): string {
  const withoutTags = html
    .replace(/<!--[\s\S]*?-->/g, '')
    .replace(/<(script|style)\b[^>]*>[\s\S]*?<\/\1\s*>/gi, '')
    .replace(/<\/?[a-z][^>]*>/gi, '');
  return decodeEntities(withoutTags).replace(/\s+/g, ' ').trim();
}
