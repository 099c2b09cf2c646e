import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { documentTitle, withTitle } from '../../src/ingestion/title.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';

describe('documentTitle', () => {
  it('takes metadata.title first, whitespace collapsed and clipped at a word', () => {
    expect(documentTitle({ title: '  Annual\n report  ' }, 'First line\n\nbody')).toBe('Annual report');
    const long = documentTitle({ title: 'word '.repeat(60) }, '');
    expect(long?.length).toBeLessThanOrEqual(200);
    expect(long?.endsWith('word')).toBe(true);
  });

  it('else the first line when it stands alone and is short', () => {
    expect(documentTitle(null, 'Quokka census 2024\n\nThe survey counted...')).toBe('Quokka census 2024');
    expect(documentTitle({}, '# Install guide\r\n\r\nRun the script.')).toBe('Install guide');
    expect(documentTitle({ title: 42 }, '\n  Spaced title  \n \nbody')).toBe('Spaced title');
  });

  it('no title for a first line that runs into the text, a long one, or an empty document', () => {
    expect(documentTitle(null, 'name,age\nann,3\n')).toBeUndefined();
    expect(documentTitle(null, `${'x'.repeat(201)}\n\nbody`)).toBeUndefined();
    expect(documentTitle(null, 'One paragraph without a break.')).toBeUndefined();
    expect(documentTitle(null, '')).toBeUndefined();
  });
});

describe('withTitle', () => {
  it('puts the title before a chunk that does not open with it', () => {
    expect(withTitle('Quokkas', 'They live on islands.')).toBe('Quokkas\n\nThey live on islands.');
    expect(withTitle('Quokkas', 'Quokkas\n\nThey live on islands.')).toBe('Quokkas\n\nThey live on islands.');
    expect(withTitle('Install guide', '# Install guide\n\nRun it.')).toBe('# Install guide\n\nRun it.');
    expect(withTitle(undefined, 'text')).toBe('text');
  });
});

describe('chunks are retrieved under their document title', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
    await createCollection(t, 'titled');
  }, 120_000);
  afterAll(async () => {
    await t.close();
  });

  it('a later chunk is found by a word only its title holds; its stored content stays as written', async () => {
    const body = Array.from(
      { length: 40 },
      (_, i) => `Paragraph ${i} lists measurements of rainfall, soil moisture and wind speed at station ${i}.`,
    ).join('\n\n');
    const r = await t.request('/api/v1/rag/collections/titled/documents', {
      method: 'POST',
      json: { name: 'survey.txt', content: `Wombat habitat survey\n\n${body}` },
    });
    expect(r.status).toBe(202);
    const { id } = (await r.json()) as { id: string };
    const doc = await waitForDocument(t, id);
    expect(doc.status).toBe('processed');
    expect(doc.chunk_count).toBeGreaterThan(2);

    const search = await t.request('/api/v1/agent/tool-calling', {
      method: 'POST',
      json: {
        tool_name: 'rag_search',
        parameters: { query: 'wombat', collection: 'titled', top_k: 50, similarity_threshold: -1, mode: 'keyword' },
      },
    });
    const { results } = (await search.json()) as { results: { content: string; metadata: { chunk_index: number } }[] };
    // Every chunk, not just the first that holds the title line.
    expect(results).toHaveLength(doc.chunk_count);
    const later = results.find((h) => h.metadata.chunk_index === doc.chunk_count - 1);
    expect(later?.content.startsWith('Paragraph')).toBe(true);
    expect(later?.content.includes('Wombat')).toBe(false);
    // BM25 lengths count the title too: term_count of a later chunk includes its 3 title terms.
    const rows = await queryRows<{ term_count: number; content: string }>(
      t.database.db,
      sql`select term_count, content from chunks where document_id = ${id} and position = ${doc.chunk_count - 1}`,
    );
    const { termFrequencies } = await import('../../src/retrieval/analyzer.ts');
    expect(rows[0]?.term_count).toBe(termFrequencies(rows[0]?.content ?? '').length + 3);
  }, 120_000);
});
