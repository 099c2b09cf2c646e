import { parseFragment } from 'parse5';

interface Node {
  nodeName: string;
  value?: string;
  childNodes?: Node[];
}

const invisible = new Set(['script', 'style', 'template', 'noscript']);

/** The text nodes under `root`, in document order, with a stack of its own (200,000 nested tags overflowed the call stack). */
function collect(root: Node, out: string[]): void {
  const stack: Node[] = [root];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (node.nodeName === '#text' && node.value !== undefined) out.push(node.value);
    if (invisible.has(node.nodeName)) continue;
    const children = node.childNodes ?? [];
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i] as Node);
  }
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
