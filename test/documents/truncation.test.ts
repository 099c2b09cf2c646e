import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection } from '../support/documents.ts';

/**
 * Text beyond the characters kept per document (PARSE_MAX_CHARS, 10 million by default) is not
 * indexed. It used to be dropped without a word: the document was `processed` with no sign that
 * its tail was not searchable (a probe's 12-million-character upload lost its last paragraph).
 */
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ config: { maxDocumentChars: 2_000 } });
  await createCollection(t, 'kb');
}, 120_000);
afterAll(async () => {
  await t.close();
});

interface Doc {
  id: string;
  status: string;
  warning: string | null;
  version: number;
}

const upload = async (name: string, content: string) => {
  const response = await t.request('/api/v1/rag/collections/kb/documents?wait=true', {
    method: 'POST',
    json: { name, content },
  });
  expect(response.status).toBe(200);
  return (await response.json()) as Doc;
};

const search = async (query: string) => {
  const response = await t.request('/api/v1/agent/tool-calling', {
    method: 'POST',
    json: { tool_name: 'rag_search', parameters: { query, collection: 'kb', mode: 'keyword', top_k: 5 } },
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { results: { document_id: string }[] }).results;
};

describe('a document whose text is cut at the limit', () => {
  it('says so on its record and in the list; its tail is not searchable; a shorter version clears it', async () => {
    const filler = 'Lighthouse keepers logged the weather every four hours. '.repeat(60); // ~3,400 characters
    const long = await upload('long.txt', `${filler} The zanzibar quokka marker comes last.`);
    expect(long.status).toBe('processed');
    expect(long.warning).toBe(
      'The text was cut at 2,000 characters, the limit per document: what follows is not searchable ' +
        '(split the document to index all of it)',
    );
    const short = await upload('short.txt', 'A short note about the zanzibar quokka.');
    expect(short.warning).toBeNull();
    expect((await search('zanzibar quokka')).map((r) => r.document_id)).toEqual([short.id]);

    const detail = (await (await t.request(`/api/v1/rag/documents/${long.id}`)).json()) as Doc;
    expect(detail.warning).toBe(long.warning);
    const list = (await (await t.request('/api/v1/rag/collections/kb/documents')).json()) as { documents: Doc[] };
    expect(list.documents.find((d) => d.id === long.id)?.warning).toBe(long.warning);

    // A replace that fits: the searchable version left nothing out.
    const replaced = await t.request(`/api/v1/rag/documents/${long.id}`, {
      method: 'PUT',
      json: { name: 'long.txt', content: 'Now short: the zanzibar quokka fits.' },
    });
    expect(replaced.status).toBe(202);
    const settled = await t.request(`/api/v1/rag/documents/${long.id}?wait=true`);
    const now = (await settled.json()) as Doc;
    expect(now).toMatchObject({ status: 'processed', version: 2, warning: null });
    expect((await search('zanzibar quokka')).map((r) => r.document_id).sort()).toEqual([long.id, short.id].sort());
  });
});
