import { parseHTML } from 'linkedom';
import { parse, serialize } from 'parse5';
import { normaliseInline } from './text-sink.ts';

/**
 * The little of the DOM that rendering needs. The project compiles without the DOM library, so
 * linkedom's and Readability's `Document` types are unresolved; this structural type is checked
 * instead, and linkedom's nodes satisfy it.
 */
export interface DomNode {
  readonly nodeType: number;
  readonly nodeName: string;
  readonly textContent: string | null;
  readonly childNodes: ArrayLike<DomNode>;
}

export interface DomDocument extends DomNode {
  readonly body: DomNode | null;
  readonly documentElement: DomNode;
}

/**
 * linkedom builds its tree with htmlparser2, which does not apply HTML5's tree construction: a
 * script before <head> leaves an empty <body> first and the real one after it. parse5 is the
 * spec's parser, so the page is parsed by it, re-serialised as a well-formed tree, then loaded
 * into linkedom for Readability's DOM API.
 */
export const parseHtmlDocument = (html: string): DomDocument =>
  (parseHTML(serialize(parse(html))) as unknown as { document: DomDocument }).document;

const textNode = 3;
const elementNode = 1;

/** Never text a reader sees. */
const invisible = new Set([
  'SCRIPT',
  'STYLE',
  'NOSCRIPT',
  'TEMPLATE',
  'HEAD',
  'TITLE',
  'SVG',
  'MATH',
  'IFRAME',
  'OBJECT',
  'EMBED',
  'CANVAS',
  'SELECT',
  'OPTION',
  'BUTTON',
  'INPUT',
  'TEXTAREA',
  'LINK',
  'META',
]);

/** Site furniture, dropped when the page is rendered without Readability's help. */
export const boilerplate = new Set(['NAV', 'HEADER', 'FOOTER', 'ASIDE', 'FORM', 'DIALOG']);

const blocks = new Set([
  'ADDRESS',
  'ARTICLE',
  'ASIDE',
  'BLOCKQUOTE',
  'BODY',
  'CENTER',
  'DD',
  'DETAILS',
  'DIALOG',
  'DIV',
  'DL',
  'DT',
  'FIELDSET',
  'FIGCAPTION',
  'FIGURE',
  'FOOTER',
  'FORM',
  'H1',
  'H2',
  'H3',
  'H4',
  'H5',
  'H6',
  'HEADER',
  'HR',
  'HTML',
  'LI',
  'MAIN',
  'NAV',
  'OL',
  'P',
  'PRE',
  'SECTION',
  'SUMMARY',
  'UL',
  'CAPTION',
]);

/** Deeper structure is flattened to its text content; hostile pages nest thousands of levels. */
const maxDepth = 256;

/** Depth of the element tree, counted without recursion and given up once past `limit`. */
export function depthExceeds(root: DomNode, limit: number): boolean {
  const stack: [DomNode, number][] = [[root, 0]];
  for (let entry = stack.pop(); entry !== undefined; entry = stack.pop()) {
    const [node, depth] = entry;
    if (depth > limit) return true;
    for (const child of Array.from(node.childNodes)) if (child.nodeType === elementNode) stack.push([child, depth + 1]);
  }
  return false;
}

const nameOf = (node: DomNode): string => node.nodeName.toUpperCase();

const elementChildren = (node: DomNode, names: readonly string[]): DomNode[] =>
  Array.from(node.childNodes).filter((child) => child.nodeType === elementNode && names.includes(nameOf(child)));

/** Rows of a table in document order, without descending into nested tables. */
const rowsOf = (table: DomNode): DomNode[] =>
  elementChildren(table, ['TR', 'THEAD', 'TBODY', 'TFOOT']).flatMap((child) =>
    nameOf(child) === 'TR' ? [child] : elementChildren(child, ['TR']),
  );

/**
 * Renders a DOM subtree as paragraphs separated by a blank line. Table rows become lines with
 * cells separated by " | ", so a row stays together and each cell value is searchable.
 */
export class HtmlRenderer {
  readonly paragraphs: string[] = [];
  private lines: string[] = [];
  private line = '';
  private readonly skip: ReadonlySet<string>;
  private readonly nested: boolean;

  /** `nested` renders a table inside a cell, whose rows and cells must not look like the outer ones. */
  constructor(skip: ReadonlySet<string> = new Set(), nested = false) {
    this.skip = skip;
    this.nested = nested;
  }

  render(node: DomNode, depth = 0, pre = false): this {
    if (node.nodeType === textNode) {
      this.text(node.textContent ?? '', pre);
      return this;
    }
    if (node.nodeType !== elementNode && node.nodeType !== 9 && node.nodeType !== 11) return this;
    const name = nameOf(node);
    if (invisible.has(name) || this.skip.has(name)) return this;
    if (depth > maxDepth) {
      this.text(node.textContent ?? '', false);
      return this;
    }
    if (name === 'BR') return this.breakLine();
    if (name === 'TABLE') return this.table(node, depth);
    const block = blocks.has(name);
    if (block) this.breakParagraph();
    for (const child of Array.from(node.childNodes)) this.render(child, depth + 1, pre || name === 'PRE');
    if (block) this.breakParagraph();
    return this;
  }

  /** Paragraphs as the text output: paragraphs separated by a blank line. */
  finish(): string[] {
    this.breakParagraph();
    return this.paragraphs;
  }

  private text(text: string, pre: boolean): void {
    if (!pre) {
      this.line += text.replace(/\s+/g, ' ');
      return;
    }
    const parts = text.split('\n');
    parts.forEach((part, i) => {
      if (i > 0) this.breakLine();
      this.line += part;
    });
  }

  private breakLine(): this {
    const line = normaliseInline(this.line);
    if (line !== '') this.lines.push(line);
    this.line = '';
    return this;
  }

  private breakParagraph(): void {
    this.breakLine();
    if (this.lines.length > 0) this.paragraphs.push(this.lines.join('\n'));
    this.lines = [];
  }

  private table(table: DomNode, depth: number): this {
    this.breakParagraph();
    for (const row of rowsOf(table)) {
      const cells = elementChildren(row, ['TD', 'TH']).map((cell) => {
        // A cell's own paragraphs and nested tables are flattened onto the row's line.
        const inner = new HtmlRenderer(this.skip, true);
        for (const child of Array.from(cell.childNodes)) inner.render(child, depth + 1);
        return inner.finish().join('; ').replace(/\n/g, '; ');
      });
      if (cells.some((cell) => cell !== '')) this.lines.push(cells.join(this.nested ? ', ' : ' | '));
    }
    this.breakParagraph();
    return this;
  }
}
