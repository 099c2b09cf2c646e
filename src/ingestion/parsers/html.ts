import { Readability } from '@mozilla/readability';
import { decodeText } from './decode.ts';
import { ParseError, messageOf } from './errors.ts';
import { boilerplate, depthExceeds, HtmlRenderer, parseHtmlDocument } from './html-text.ts';
import type { DomDocument } from './html-text.ts';
import { TextSink } from './text-sink.ts';
import type { ParsedDocument, ParseLimits } from './types.ts';

/**
 * HTML main text. Readability (Firefox Reader View's algorithm) finds the article and drops
 * navigation, sidebars and comments; it runs on linkedom, a light DOM that parses in a fraction
 * of jsdom's time and memory. Readability gives up on some pages (link lists, table layouts) and
 * keeps everything on short ones, so its result is used only for a substantial article that kept
 * a fair share of the page's text;
 * otherwise the whole body is rendered without script, style and the nav/header/footer/aside
 * landmarks.
 */
export function parseHtml(bytes: Uint8Array, limits?: ParseLimits): ParsedDocument {
  const html = decodeText(bytes);
  let whole: string[];
  let article: { title: string; paragraphs: string[] } | undefined;
  try {
    const document = parseHtmlDocument(html);
    whole = new HtmlRenderer(boilerplate).render(document.body ?? document.documentElement).finish();
    article = readArticle(document);
  } catch (error) {
    // Stack exhaustion on absurd nesting is the realistic failure; the parsers never throw on tag soup.
    throw new ParseError(`HTML could not be read: ${messageOf(error)}`, { cause: error });
  }
  const wholeLength = lengthOf(whole);
  const articleLength = article === undefined ? 0 : lengthOf(article.paragraphs);
  // On short pages Readability keeps the whole body, menus included; the landmark-free render is
  // better there.
  const useArticle = articleLength >= 500 && articleLength >= wholeLength * 0.3;
  const sink = new TextSink(limits);
  const paragraphs = useArticle && article !== undefined ? withTitle(article.title, article.paragraphs) : whole;
  for (const paragraph of paragraphs) if (!sink.add(paragraph)) break;
  return sink.result({ extraction: useArticle ? 'readability' : 'body' });
}

const lengthOf = (paragraphs: readonly string[]): number => paragraphs.reduce((sum, p) => sum + p.length, 0);

const withTitle = (title: string, paragraphs: string[]): string[] =>
  title === '' || paragraphs[0]?.includes(title) === true ? paragraphs : [title, ...paragraphs];

/**
 * Readability's scoring walks ancestors for every node: a page nested 1,000 levels deep takes it
 * seconds, 4,000 levels minutes. Real pages stay well under 100 levels, and past a size limit it
 * gives up by throwing; in either case the body render is used.
 */
const readabilityMaxDepth = 200;
const readabilityMaxElements = 100_000;

function readArticle(document: DomDocument): { title: string; paragraphs: string[] } | undefined {
  if (depthExceeds(document.documentElement, readabilityMaxDepth)) return undefined;
  let result: ReturnType<Readability['parse']>;
  try {
    // Readability mutates the document, so the body was rendered first.
    result = new Readability(document, { charThreshold: 200, maxElemsToParse: readabilityMaxElements }).parse();
  } catch {
    return undefined;
  }
  if (result === null || typeof result.content !== 'string') return undefined;
  const content = parseHtmlDocument(`<!doctype html><html><body>${result.content}</body></html>`);
  const paragraphs = new HtmlRenderer().render(content.body ?? content.documentElement).finish();
  return { title: (result.title ?? '').trim(), paragraphs };
}
