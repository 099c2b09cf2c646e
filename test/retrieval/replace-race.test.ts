/**
 * A keyword search reads its BM25 candidates and scores them in two statements. A replace that
 * commits between the two takes every candidate with it; the search must then answer from the
 * new version, not with nothing. The commit is placed exactly there: the real repository, with the
 * replace run right after its candidate read returns.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { createCollectionsRepository } from '../../src/collections/collections.repository.ts';
import { createCollectionsService } from '../../src/collections/collections.service.ts';
import { queryRows } from '../../src/db/client.ts';
import type { Principal } from '../../src/keys/principal.ts';
import { termFrequencies } from '../../src/retrieval/analyzer.ts';
import { createIndexRepository, type IndexedChunk } from '../../src/retrieval/index.repository.ts';
import { createRetrievalRepository } from '../../src/retrieval/retrieval.repository.ts';
import { createRetrievalService } from '../../src/retrieval/retrieval.service.ts';
import { startTestApp } from '../support/app.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import { testEmbeddings } from '../support/embeddings.ts';

const t = await startTestApp({ config: { ingestionConcurrency: 1 } });
afterAll(() => t.close());

const admin: Principal = {
  keyId: 'test',
  scopes: ['admin'],
  tier: 'enterprise',
  limits: { minute: null, hour: null, day: null },
  quota: { requestsPerDay: null, tokensPerMonth: null },
  collections: null,
};

describe('a replace committing between the two statements of a keyword search', () => {
  it('leaves the search an answer from the new version', async () => {
    const collection = await createCollection(t, 'race');
    const r = await t.request('/api/v1/rag/collections/race/documents', {
      method: 'POST',
      json: { name: 'r.txt', content: 'The quarry foreman logged granite shipments every morning.' },
    });
    const { id } = (await r.json()) as { id: string };
    await waitForDocument(t, id);

    const db = t.database.db;
    const index = createIndexRepository(db);
    // The "new version": the same chunks again under new ids, as a replace writes them.
    const rows = await queryRows<{
      position: number;
      start_char: number;
      end_char: number;
      token_count: number;
      content: string;
      model: string;
      embedding: string;
    }>(
      db,
      sql`select position, start_char, end_char, token_count, content, model, embedding::text as embedding
          from chunks where document_id = ${id} order by position`,
    );
    const next: IndexedChunk[] = rows.map((row) => {
      const { tf, length } = termFrequencies(row.content);
      return {
        position: row.position,
        startChar: row.start_char,
        endChar: row.end_char,
        tokenCount: row.token_count,
        content: row.content,
        embedding: Float32Array.from(JSON.parse(row.embedding) as number[]),
        terms: tf,
        termCount: length,
      };
    });
    const before = rows.length;
    expect(before).toBeGreaterThan(0);

    const repo = createRetrievalRepository(db);
    let replaced = false;
    const racing: typeof repo = {
      ...repo,
      async keywordCandidates(q) {
        const ids = await repo.keywordCandidates(q);
        if (!replaced) {
          replaced = true;
          await index.replaceDocument(id, collection.id, rows[0]?.model ?? '', next);
        }
        return ids;
      },
    };
    const embeddings = await testEmbeddings();
    const retrieval = createRetrievalService({
      repo: racing,
      collections: createCollectionsService({
        repo: createCollectionsRepository(db),
        embeddings,
        hnsw: t.config.hnsw,
      }),
      embeddings,
      settings: t.config.retrieval,
    });
    const hits = await retrieval.search(admin, {
      collection: 'race',
      query: 'granite quarry',
      mode: 'keyword',
      topK: 5,
      threshold: -1,
      filters: undefined,
    });
    expect(replaced).toBe(true);
    expect(hits.length).toBeGreaterThan(0);
    expect(hits[0]?.content).toContain('granite');
  }, 120_000);
});
