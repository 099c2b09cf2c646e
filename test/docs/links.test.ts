import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// Docs that cannot rot silently: a section deleted from the README once left links in docs/
// pointing at nothing (issue 16). Every relative link and every anchor must resolve.

const root = fileURLToPath(new URL('../..', import.meta.url));

const markdownFiles = (): string[] => {
  const docs = path.join(root, 'docs');
  const pages = readdirSync(docs)
    .filter((f) => f.endsWith('.md'))
    .map((f) => path.join(docs, f));
  const bench = path.join(root, 'bench', 'README.md');
  return [
    path.join(root, 'README.md'),
    ...pages,
    ...(existsSync(bench) ? [bench] : []),
    path.join(root, 'CHANGELOG.md'),
  ];
};

/** Text outside fenced and inline code, where links are links. */
const unfenced = (markdown: string) => markdown.replace(/^(```|~~~)[\s\S]*?^\1/gm, '');
const prose = (markdown: string) => unfenced(markdown).replace(/`[^`\n]*`/g, '');

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of unfenced(markdown).split('\n')) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const text = (heading[1] as string)
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .replace(/`/g, '');
    const base = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of markdown.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(m[1] as string);
  return anchors;
}

/** Every inline link and image target in the prose. */
const linksOf = (markdown: string) =>
  [...prose(markdown).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1] as string);

describe('documentation links', () => {
  const files = markdownFiles();

  it('finds the pages', () => {
    expect(files.length).toBeGreaterThan(3);
  });

  for (const file of files) {
    it(`every relative link and anchor in ${path.relative(root, file)} resolves`, () => {
      const markdown = readFileSync(file, 'utf8');
      const broken: string[] = [];
      for (const link of linksOf(markdown)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // http:, https:, mailto: — not ours to check offline
        const [target = '', anchor] = link.split('#');
        const resolved = target === '' ? file : path.resolve(path.dirname(file), decodeURIComponent(target));
        if (!resolved.startsWith(root)) {
          // ../shared/… is beside the repository, present in development and CI.
          if (!existsSync(resolved)) broken.push(`${link} (no such file)`);
          continue;
        }
        if (!existsSync(resolved)) {
          broken.push(`${link} (no such file)`);
          continue;
        }
        if (anchor === undefined || anchor === '') continue;
        if (statSync(resolved).isDirectory() || !resolved.endsWith('.md')) {
          if (!/^L\d+(-L\d+)?$/.test(anchor)) broken.push(`${link} (anchor on a non-Markdown target)`);
          continue;
        }
        if (!anchorsOf(readFileSync(resolved, 'utf8')).has(decodeURIComponent(anchor))) {
          broken.push(`${link} (no heading #${anchor} in ${path.relative(root, resolved)})`);
        }
      }
      expect(broken).toEqual([]);
    });
  }

  it('the anchor rules match GitHub on the cases we use', () => {
    const anchors = anchorsOf('# A `code` Title!\n## Rate limits & quotas\n## Rate limits & quotas\n');
    expect([...anchors]).toEqual(['a-code-title', 'rate-limits--quotas', 'rate-limits--quotas-1']);
  });
});
