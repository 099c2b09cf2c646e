import type { Builtins } from './inspect-builtins.ts';

/**
 * How `util.inspect` quotes and escapes strings and measures their width, for the sandbox's
 * `console` (Node 24's strEscape and, as Node built without ICU has it, getStringWidth). Runs in
 * the isolate from its source text: self-contained (see inspect.ts).
 */
export function createStrings(b: Builtins) {
  const {
    charCodeAt,
    codePointAt,
    normalize,
    padStart,
    regexpExec,
    regexpReplace,
    stringIncludes,
    stringIndexOf,
    stringSlice,
  } = b;
  const strEscapeSequencesRegExp =
    /[\x00-\x1f\x27\x5c\x7f-\x9f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
  const strEscapeSequencesReplacer =
    /[\x00-\x1f\x27\x5c\x7f-\x9f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
  const strEscapeSequencesRegExpSingle =
    /[\x00-\x1f\x5c\x7f-\x9f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
  const strEscapeSequencesReplacerSingle =
    /[\x00-\x1f\x5c\x7f-\x9f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
  const ansi =
    /(?:\u001B\][\s\S]*?(?:\u0007|\u001B\u005C|\u009C))|[\u001B\u009B][[\]()#;?]*(?:\d{1,4}(?:[;:]\d{0,4})*)?[\dA-PR-TZcf-nq-uy=><~]/g;
  const meta: string[] = [];
  for (let i = 0; i < 0xa0; i++) {
    meta[i] = i < 0x20 || i >= 0x7f ? `\\x${padStart(i.toString(16).toUpperCase(), 2, '0')}` : '';
  }
  meta[8] = '\\b';
  meta[9] = '\\t';
  meta[10] = '\\n';
  meta[12] = '\\f';
  meta[13] = '\\r';
  meta[39] = "\\'";
  meta[92] = '\\\\';

  function addQuotes(str: string, quotes: number): string {
    if (quotes === -1) return `"${str}"`;
    if (quotes === -2) return `\`${str}\``;
    return `'${str}'`;
  }

  function escapeFn(str: string): string {
    const charCode = charCodeAt(str, 0);
    return meta.length > charCode ? (meta[charCode] as string) : `\\u${charCode.toString(16)}`;
  }

  function strEscape(str: string): string {
    let escapeTest = strEscapeSequencesRegExp;
    let escapeReplace = strEscapeSequencesReplacer;
    let singleQuote = 39;
    if (stringIncludes(str, "'")) {
      if (!stringIncludes(str, '"')) singleQuote = -1;
      else if (!stringIncludes(str, '`') && !stringIncludes(str, '${')) singleQuote = -2;
      if (singleQuote !== 39) {
        escapeTest = strEscapeSequencesRegExpSingle;
        escapeReplace = strEscapeSequencesReplacerSingle;
      }
    }
    if (str.length < 5000 && regexpExec(escapeTest, str) === null) return addQuotes(str, singleQuote);
    if (str.length > 100) return addQuotes(regexpReplace(escapeReplace, str, escapeFn), singleQuote);
    let result = '';
    let last = 0;
    for (let i = 0; i < str.length; i++) {
      const point = charCodeAt(str, i);
      if (point === singleQuote || point === 92 || point < 32 || (point > 126 && point < 160)) {
        result += last === i ? meta[point] : `${stringSlice(str, last, i)}${meta[point]}`;
        last = i + 1;
      } else if (point >= 0xd800 && point <= 0xdfff) {
        if (point <= 0xdbff && i + 1 < str.length) {
          const next = charCodeAt(str, i + 1);
          if (next >= 0xdc00 && next <= 0xdfff) {
            i++;
            continue;
          }
        }
        result += `${stringSlice(str, last, i)}\\u${point.toString(16)}`;
        last = i + 1;
      }
    }
    if (last !== str.length) result += stringSlice(str, last);
    return addQuotes(result, singleQuote);
  }

  function isFullWidthCodePoint(code: number): boolean {
    return (
      code >= 0x1100 &&
      (code <= 0x115f ||
        code === 0x2329 ||
        code === 0x232a ||
        (code >= 0x2e80 && code <= 0x3247 && code !== 0x303f) ||
        (code >= 0x3250 && code <= 0x4dbf) ||
        (code >= 0x4e00 && code <= 0xa4c6) ||
        (code >= 0xa960 && code <= 0xa97c) ||
        (code >= 0xac00 && code <= 0xd7a3) ||
        (code >= 0xf900 && code <= 0xfaff) ||
        (code >= 0xfe10 && code <= 0xfe19) ||
        (code >= 0xfe30 && code <= 0xfe6b) ||
        (code >= 0xff01 && code <= 0xff60) ||
        (code >= 0xffe0 && code <= 0xffe6) ||
        (code >= 0x1b000 && code <= 0x1b001) ||
        (code >= 0x1f200 && code <= 0x1f251) ||
        (code >= 0x1f300 && code <= 0x1f64f) ||
        (code >= 0x20000 && code <= 0x3fffd))
    );
  }

  function isZeroWidthCodePoint(code: number): boolean {
    return (
      code <= 0x1f ||
      (code >= 0x7f && code <= 0x9f) ||
      (code >= 0x300 && code <= 0x36f) ||
      (code >= 0x200b && code <= 0x200f) ||
      (code >= 0x20d0 && code <= 0x20ff) ||
      (code >= 0xfe00 && code <= 0xfe0f) ||
      (code >= 0xfe20 && code <= 0xfe2f) ||
      (code >= 0xe0100 && code <= 0xe01ef)
    );
  }

  function getStringWidth(str: string): number {
    if (stringIndexOf(str, '\u001B') !== -1 || stringIndexOf(str, '\u009B') !== -1) {
      str = regexpReplace(ansi, str, '');
    }
    str = normalize(str, 'NFC');
    let width = 0;
    for (let i = 0; i < str.length; i++) {
      const code = codePointAt(str, i) as number;
      if (code > 0xffff) i++;
      if (isFullWidthCodePoint(code)) width += 2;
      else if (!isZeroWidthCodePoint(code)) width++;
    }
    return width;
  }

  return { strEscape, escapeFn, getStringWidth, strEscapeSequencesReplacer };
}

export type Strings = ReturnType<typeof createStrings>;
