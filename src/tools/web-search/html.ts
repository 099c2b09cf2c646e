import { parseFragment } from 'parse5';

interface Node {
  nodeName: string;
  value?: string;
  childNodes?: Node[];
}

const invisible = new Set(['script', 'style', 'template', 'noscript']);

function collect(node: Node, out: string[]): void {
  if (node.nodeName === '#text' && node.value !== undefined) out.push(node.value);
  if (invisible.has(node.nodeName)) return;
  for (const child of node.childNodes ?? []) collect(child, out);
}

/**
 * Snippet text from the HTML fragments providers return (Brave wraps matches in <strong>): an
 * HTML parser drops tags and comments and decodes every entity, so an encoded `&lt;b&gt;` stays
 * literal text and a stray `<` does not swallow the rest.
 */
export function stripHtml(html: string): string {
  if (!/[<&]/.test(html)) return html.replace(/\s+/g, ' ').trim();
  const out: string[] = [];
  collect(parseFragment(html), out);
  return out.join('').replace(/\s+/g, ' ').trim();
}
