import { stemmer } from 'stemmer';

/**
 * The keyword analyzer, the same at indexing and at query time: Unicode word segmentation,
 * lower case, English possessives dropped, Lucene's English stop words removed, Porter stems.
 * It mirrors Lucene's EnglishAnalyzer, which BEIR's BM25 baselines use.
 */
const stopWords = new Set(
  'a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with'.split(
    ' ',
  ),
);

const segmenter = new Intl.Segmenter('en', { granularity: 'word' });
const latin = /^[a-z0-9]+$/;

export function analyze(text: string): string[] {
  const terms: string[] = [];
  for (const { segment, isWordLike } of segmenter.segment(text.normalize('NFKC').toLowerCase())) {
    if (!isWordLike) continue;
    let word = segment.replace(/['’]s$/, '');
    if (word.length === 0 || stopWords.has(word)) continue;
    if (latin.test(word)) word = stemmer(word);
    // Postgres btree entries have a size limit; terms this long are noise anyway.
    if (word.length <= 100) terms.push(word);
  }
  return terms;
}

/** Term frequencies of a text, and its length in terms (BM25's document length). */
export function termFrequencies(text: string): { tf: Map<string, number>; length: number } {
  const tf = new Map<string, number>();
  const terms = analyze(text);
  for (const t of terms) tf.set(t, (tf.get(t) ?? 0) + 1);
  return { tf, length: terms.length };
}
