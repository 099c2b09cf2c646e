import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows } from '../../src/db/client.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createCollection, waitForDocument } from '../support/documents.ts';
import { sharedJsonLines } from '../support/fixtures.ts';

interface Hit {
  document_id: string;
  score: number;
  content: string;
  metadata: { title: string; path: string; document_name: string } & Record<string, unknown>;
  scores: { dense: number; keyword?: number; fused?: number; rerank?: number };
}

let t: TestApp;
const docIds = new Map<string, string>();

const upload = async (collection: string, name: string, content: string, metadata?: Record<string, unknown>) => {
  const r = await t.request(`/api/v1/rag/collections/${collection}/documents`, {
    method: 'POST',
    json: { name, content, ...(metadata ? { metadata } : {}) },
  });
  expect(r.status).toBe(202);
  const { id } = (await r.json()) as { id: string };
  expect((await waitForDocument(t, id)).status).toBe('processed');
  docIds.set(name, id);
  return id;
};

const search = async (parameters: Record<string, unknown>, key?: string) =>
  t.request('/api/v1/agent/tool-calling', {
    method: 'POST',
    json: { tool_name: 'rag_search', parameters },
    ...(key ? { key } : {}),
  });

const hits = async (parameters: Record<string, unknown>) => {
  const r = await search(parameters);
  expect(r.status).toBe(200);
  return ((await r.json()) as { results: Hit[] }).results;
};

const names = (results: Hit[]) => results.map((h) => h.metadata.document_name);

beforeAll(async () => {
  t = await startTestApp();
  await createCollection(t, 'kb');
  const docs: [string, string, Record<string, unknown>][] = [
    [
      'cats.txt',
      'Cats are small domesticated felines. They purr when content and hunt mice.',
      { team: 'pets', year: 2020, draft: true, owner: { level: 1 }, tags: ['mammal', 'hunter'] },
    ],
    [
      'dogs.txt',
      'Dogs are loyal domesticated canines that bark and love long walks.',
      { team: 'pets', year: 2021, owner: { level: 2 }, tags: ['mammal', 'loyal'] },
    ],
    [
      'revenue.txt',
      'Quarterly revenue grew twelve percent thanks to strong subscription sales.',
      { team: 'finance', year: 2022 },
    ],
    ['orders.txt', 'Order 83741-ZQ was shipped to the warehouse in Rotterdam on Monday.', { team: 'ops', year: 2023 }],
    ['orders2.txt', 'Order 51209-KA was shipped to the warehouse in Hamburg on Tuesday.', { team: 'ops', year: 2024 }],
    [
      'rockets.txt',
      'Rockets burn liquid oxygen and kerosene to reach orbit.',
      { team: 'space', year: 2025, title: 'Rocket Science', path: 'wiki/rockets' },
    ],
  ];
  for (const [name, content, metadata] of docs) await upload('kb', name, content, metadata);
}, 120_000);
afterAll(async () => {
  await t.close();
});

describe('tool-calling errors', () => {
  it('unknown tool, bad parameters, unknown or inaccessible collection', async () => {
    const unknown = await t.request('/api/v1/agent/tool-calling', {
      method: 'POST',
      json: { tool_name: 'nope', parameters: {} },
    });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: "Tool 'nope' not found" });

    const missing = await search({ collection: 'kb' });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: string }).error).toMatch(/^parameters\.query/);
    for (const bad of [
      { top_k: 0 },
      { top_k: 'five' },
      { similarity_threshold: 2 },
      { mode: 'fuzzy' },
      { filters: { x: { $regex: 'a' } } },
      // Mongo's logical operators are not supported: refused, not read as a field named "$or".
      { filters: { $or: [{ x: 1 }] } },
      { filters: { $and: [{ x: 1 }, { y: 2 }] } },
    ]) {
      const r = await search({ query: 'cats', collection: 'kb', ...bad });
      expect(r.status, JSON.stringify(bad)).toBe(400);
      expect(typeof ((await r.json()) as { error: unknown }).error).toBe('string');
    }
    const noBody = await t.request('/api/v1/agent/tool-calling', { method: 'POST', json: { tool_name: 'rag_search' } });
    expect(noBody.status).toBe(400);

    const nowhere = await search({ query: 'cats', collection: 'missing' });
    expect(nowhere.status).toBe(404);
    expect(await nowhere.json()).toEqual({ error: 'Collection not found' });
    const restricted = await t.createKey({ name: 'r', scopes: ['tools'], collections: ['other'] });
    const hidden = await search({ query: 'cats', collection: 'kb' }, restricted.key);
    expect(hidden.status).toBe(404);
    expect(await hidden.json()).toEqual({ error: 'Collection not found' });
  });
});

describe('rag_search', () => {
  it('returns document_id, score with its breakdown, content and metadata with title and path', async () => {
    const [top] = await hits({ query: 'Which animal purrs?', collection: 'kb', similarity_threshold: 0 });
    expect(top).toMatchObject({
      document_id: docIds.get('cats.txt'),
      content: expect.stringContaining('purr'),
      metadata: { title: 'cats.txt', path: 'kb/cats.txt', team: 'pets' },
    });
    expect(top?.scores.dense).toBeGreaterThan(0.3);
    expect(top?.scores.dense).toBeLessThanOrEqual(1);
    expect(top?.scores.keyword).toBeGreaterThan(0);
    // The contract's score is the cosine similarity; the fused value (which ordered it) is beside it.
    expect(top?.score).toBe(top?.scores.dense);
    expect(top?.scores.fused).toBeGreaterThan(0);
    const [rocket] = await hits({ query: 'rocket fuel', collection: 'kb', similarity_threshold: 0, top_k: 1 });
    expect(rocket?.metadata).toMatchObject({ title: 'Rocket Science', path: 'wiki/rockets' });
  });

  it('score is the cosine similarity of the query and the chunk, as /embeddings gives them, and at least the threshold', async () => {
    const query = 'Which animal purrs?';
    const results = await hits({ query, collection: 'kb', similarity_threshold: 0.05, top_k: 10 });
    expect(results.length).toBeGreaterThan(1);
    const r = await t.request('/api/v1/embeddings', {
      method: 'POST',
      json: { model: 'text-embedding-ada-002', input: [query, ...results.map((h) => h.content)] },
    });
    expect(r.status).toBe(200);
    const vectors = ((await r.json()) as { data: { embedding: number[] }[] }).data.map((d) => d.embedding);
    const cosine = (a: number[], b: number[]) => {
      let dot = 0;
      let na = 0;
      let nb = 0;
      a.forEach((x, i) => {
        const y = b[i] as number;
        dot += x * y;
        na += x * x;
        nb += y * y;
      });
      return dot / Math.sqrt(na * nb);
    };
    results.forEach((h, i) => {
      expect(h.score).toBeCloseTo(cosine(vectors[0] as number[], vectors[i + 1] as number[]), 4);
      expect(h.score).toBeGreaterThanOrEqual(0.05);
    });
  });

  it('top_k defaults to 5 and bounds the results', async () => {
    expect(await hits({ query: 'domesticated animals', collection: 'kb', similarity_threshold: -1 })).toHaveLength(5);
    expect(
      await hits({ query: 'domesticated animals', collection: 'kb', similarity_threshold: -1, top_k: 2 }),
    ).toHaveLength(2);
    expect(
      await hits({ query: 'domesticated animals', collection: 'kb', similarity_threshold: -1, top_k: 50 }),
    ).toHaveLength(6);
  });

  it('similarity_threshold keeps a chunk just below its score and drops it just above', async () => {
    const all = await hits({ query: 'canines that bark', collection: 'kb', similarity_threshold: -1, top_k: 10 });
    const dog = all.find((h) => h.document_id === docIds.get('dogs.txt'));
    expect(dog).toBeDefined();
    const at = dog?.scores.dense as number;
    const below = await hits({
      query: 'canines that bark',
      collection: 'kb',
      similarity_threshold: at - 1e-6,
      top_k: 10,
    });
    expect(below.map((h) => h.document_id)).toContain(docIds.get('dogs.txt'));
    const above = await hits({
      query: 'canines that bark',
      collection: 'kb',
      similarity_threshold: at + 1e-6,
      top_k: 10,
    });
    expect(above.map((h) => h.document_id)).not.toContain(docIds.get('dogs.txt'));
    for (const h of above) expect(h.scores.dense).toBeGreaterThanOrEqual(at + 1e-6);
    // The default threshold is 0.5 on the cosine similarity.
    for (const h of await hits({ query: 'canines that bark', collection: 'kb', top_k: 10 }))
      expect(h.scores.dense).toBeGreaterThanOrEqual(0.5);
  });

  it('the keyword leg finds an exact identifier; hybrid ranks it first', async () => {
    for (const mode of ['keyword', 'hybrid']) {
      const [top] = await hits({ query: '83741-ZQ', collection: 'kb', similarity_threshold: -1, mode });
      expect(top?.document_id, mode).toBe(docIds.get('orders.txt'));
    }
    const [keywordTop] = await hits({
      query: 'Hamburg',
      collection: 'kb',
      similarity_threshold: -1,
      mode: 'keyword',
      top_k: 1,
    });
    expect(keywordTop?.document_id).toBe(docIds.get('orders2.txt'));
    // A term no document has: the keyword leg returns nothing at all.
    expect(await hits({ query: 'zyxwvut', collection: 'kb', similarity_threshold: -1, mode: 'keyword' })).toEqual([]);
  });

  it('each filter operator', async () => {
    const q = { query: 'anything at all', collection: 'kb', similarity_threshold: -1, top_k: 50 };
    const run = async (filters: Record<string, unknown>) => names(await hits({ ...q, filters })).sort();
    expect(await run({ team: 'pets' })).toEqual(['cats.txt', 'dogs.txt']);
    expect(await run({ team: { $eq: 'ops' } })).toEqual(['orders.txt', 'orders2.txt']);
    expect(await run({ team: { $ne: 'pets' } })).toEqual(['orders.txt', 'orders2.txt', 'revenue.txt', 'rockets.txt']);
    expect(await run({ team: { $in: ['finance', 'space'] } })).toEqual(['revenue.txt', 'rockets.txt']);
    expect(await run({ team: { $nin: ['pets', 'ops'] } })).toEqual(['revenue.txt', 'rockets.txt']);
    expect(await run({ year: { $gt: 2023 } })).toEqual(['orders2.txt', 'rockets.txt']);
    expect(await run({ year: { $gte: 2023 } })).toEqual(['orders.txt', 'orders2.txt', 'rockets.txt']);
    expect(await run({ year: { $lt: 2021 } })).toEqual(['cats.txt']);
    expect(await run({ year: { $lte: 2021 } })).toEqual(['cats.txt', 'dogs.txt']);
    expect(await run({ year: { $gte: 2021, $lte: 2022 } })).toEqual(['dogs.txt', 'revenue.txt']);
    expect(await run({ draft: { $exists: true } })).toEqual(['cats.txt']);
    expect((await run({ draft: { $exists: false } })).length).toBe(5);
    expect(await run({ 'owner.level': 2 })).toEqual(['dogs.txt']);
    expect(await run({ 'owner.level': { $gte: 1 } })).toEqual(['cats.txt', 'dogs.txt']);
    expect(await run({ team: 'pets', year: 2021 })).toEqual(['dogs.txt']);
    expect(await run({ team: 'nobody' })).toEqual([]);
    // Equality is met by a value inside a metadata array (docs/retrieval.md), by every operator.
    expect(await run({ tags: 'mammal' })).toEqual(['cats.txt', 'dogs.txt']);
    expect(await run({ tags: { $eq: 'hunter' } })).toEqual(['cats.txt']);
    expect(await run({ tags: { $in: ['loyal', 'nothing'] } })).toEqual(['dogs.txt']);
    expect(await run({ tags: { $ne: 'hunter' } })).toEqual([
      'dogs.txt',
      'orders.txt',
      'orders2.txt',
      'revenue.txt',
      'rockets.txt',
    ]);
    expect(await run({ tags: { $nin: ['mammal'] } })).toEqual([
      'orders.txt',
      'orders2.txt',
      'revenue.txt',
      'rockets.txt',
    ]);
    // An array value: every element must be in the metadata array.
    expect(await run({ tags: ['loyal', 'mammal'] })).toEqual(['dogs.txt']);
    expect(await run({ tags: ['loyal', 'hunter'] })).toEqual([]);
    // Filters apply to every mode.
    expect(names(await hits({ ...q, mode: 'keyword', query: 'shipped warehouse', filters: { year: 2024 } }))).toEqual([
      'orders2.txt',
    ]);
  });

  it('deleting a document removes it from both legs at once', async () => {
    const id = await upload('kb', 'temp.txt', 'Ephemeral quokka notes about marsupials.', { team: 'tmp' });
    const find = async (mode: string) =>
      (await hits({ query: 'quokka marsupials', collection: 'kb', similarity_threshold: -1, mode, top_k: 3 })).map(
        (h) => h.document_id,
      );
    for (const mode of ['dense', 'keyword', 'hybrid']) expect(await find(mode), mode).toContain(id);
    const [before] = await queryRows<{ chunks: number; terms: number }>(
      t.database.db,
      sql`select chunk_count::int as chunks, total_terms::int as terms from collection_stats s join collections c on c.id = s.collection_id where c.name = 'kb'`,
    );
    expect((await t.request(`/api/v1/rag/documents/${id}`, { method: 'DELETE' })).status).toBe(200);
    for (const mode of ['dense', 'keyword', 'hybrid']) expect(await find(mode), mode).not.toContain(id);
    const [after] = await queryRows<{ chunks: number; terms: number; postings: number }>(
      t.database.db,
      sql`select s.chunk_count::int as chunks, s.total_terms::int as terms,
                 (select count(*) from chunk_terms p join chunks c on c.id = p.chunk_id where c.document_id = ${id})::int as postings
          from collection_stats s join collections c on c.id = s.collection_id where c.name = 'kb'`,
    );
    expect(after?.chunks).toBe((before?.chunks ?? 0) - 1);
    expect(after?.terms).toBeLessThan(before?.terms ?? 0);
    expect(after?.postings).toBe(0);
  });
});

describe('selective filters over a larger collection', () => {
  it('still return top_k matches, exact or through the HNSW index with iterative scans', async () => {
    await createCollection(t, 'big');
    const topics = ['astronomy', 'cooking', 'finance', 'gardening', 'music', 'sports'];
    const uploads = [];
    for (let i = 0; i < 120; i++) {
      const topic = topics[i % topics.length] as string;
      uploads.push(
        t.request('/api/v1/rag/collections/big/documents', {
          method: 'POST',
          json: {
            name: `n${i}.txt`,
            content: `Note ${i} about ${topic}: ${topic} facts and ${topic} tips, entry number ${i}.`,
            metadata: { rare: i % 24 === 0, i },
          },
        }),
      );
    }
    const ids = await Promise.all(uploads.map(async (u) => ((await (await u).json()) as { id: string }).id));
    for (const id of ids) expect((await waitForDocument(t, id)).status).toBe('processed');
    // 5 documents are rare; the query is about astronomy, which most rare ones are not.
    const parameters = {
      query: 'astronomy facts',
      collection: 'big',
      similarity_threshold: -1,
      top_k: 5,
      filters: { rare: true },
    };
    const exact = await hits(parameters);
    expect(exact).toHaveLength(5);
    for (const h of exact) expect(h.metadata.rare).toBe(true);

    const ann = await startTestApp({
      database: t.database,
      config: { retrieval: { ...t.config.retrieval, exactBelow: 0, efSearch: 10 } },
    });
    try {
      const r = await ann.request('/api/v1/agent/tool-calling', {
        method: 'POST',
        json: { tool_name: 'rag_search', parameters: { ...parameters, mode: 'dense' } },
      });
      const viaIndex = ((await r.json()) as { results: Hit[] }).results;
      expect(viaIndex).toHaveLength(5);
      expect(new Set(viaIndex.map((h) => h.document_id))).toEqual(new Set(exact.map((h) => h.document_id)));
    } finally {
      await ann.close();
    }
  }, 120_000);
});

describe('HNSW settings on the embedded database', () => {
  // One session, ragport's alone: a search sets ef_search on it when it changes and then runs as
  // one statement, without a transaction around it.
  const show = async () =>
    (await queryRows<{ v: string }>(t.database.db, sql`select current_setting('hnsw.ef_search') as v`))[0]?.v;
  const parameters = { query: 'quokka', collection: 'ef_session', similarity_threshold: -1, mode: 'dense' };
  const searchWith = async (app: TestApp, topK: number) => {
    const r = await app.request('/api/v1/agent/tool-calling', {
      method: 'POST',
      json: { tool_name: 'rag_search', parameters: { ...parameters, top_k: topK } },
    });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { results: Hit[] }).results).toHaveLength(1);
  };

  it('HNSW_EF_SEARCH=auto (the default): 100 for a small collection, raised to the candidate count', async (ctx) => {
    if (t.database.kind !== 'pglite') ctx.skip();
    expect(t.config.retrieval.efSearch).toBe('auto');
    await createCollection(t, 'ef_session');
    await upload('ef_session', 'a.txt', 'Quokkas live on Rottnest Island and eat leaves.');
    await searchWith(t, 3);
    expect(await show()).toBe('100');
    // top_k 100: 400 candidates.
    await searchWith(t, 100);
    expect(await show()).toBe('400');
    await searchWith(t, 3);
    expect(await show()).toBe('100');
    const [iterative] = await queryRows<{ v: string }>(
      t.database.db,
      sql`select current_setting('hnsw.iterative_scan') as v`,
    );
    expect(iterative?.v).toBe('relaxed_order');
  });

  it('auto follows the collection’s size (200 from 50,000 chunks, 800 from 500,000); a number is used as set', async (ctx) => {
    if (t.database.kind !== 'pglite') ctx.skip();
    const [collection] = await queryRows<{ id: string; n: number }>(
      t.database.db,
      sql`select c.id, s.chunk_count::int as n from collections c join collection_stats s on s.collection_id = c.id
          where c.name = 'ef_session' and c.deleted_at is null`,
    );
    if (!collection) throw new Error('ef_session is created by the test before');
    const sized = async (chunks: number) => {
      await t.database.db.execute(
        sql`update collection_stats set chunk_count = ${chunks} where collection_id = ${collection.id}`,
      );
      // A new app: its repository has not read this collection's size yet.
      const app = await startTestApp({ database: t.database });
      try {
        await searchWith(app, 3);
        return show();
      } finally {
        await app.close();
      }
    };
    try {
      expect(await sized(49_999)).toBe('100');
      expect(await sized(50_000)).toBe('200');
      expect(await sized(500_000)).toBe('800');
    } finally {
      await t.database.db.execute(
        sql`update collection_stats set chunk_count = ${collection.n} where collection_id = ${collection.id}`,
      );
    }
    const configured = await startTestApp({
      database: t.database,
      config: { retrieval: { ...t.config.retrieval, efSearch: 150 } },
    });
    try {
      await searchWith(configured, 3);
      expect(await show()).toBe('150');
      await searchWith(configured, 100);
      expect(await show()).toBe('400');
    } finally {
      await configured.close();
    }
  });
});

describe('BM25 posting lists longer than BM25_TERM_POSTINGS', () => {
  it('are read best first: the same top results as reading every posting', async () => {
    await createCollection(t, 'dense_terms');
    // Eight notes mention "quokka"; the more often and the shorter the note, the higher its BM25.
    for (let i = 1; i <= 8; i++) {
      await upload(
        'dense_terms',
        `q${i}.txt`,
        `${'quokka '.repeat(i)}lives on an island ${'with sand '.repeat(9 - i)}`,
      );
    }
    const parameters = {
      query: 'quokka',
      collection: 'dense_terms',
      top_k: 3,
      similarity_threshold: -1,
      mode: 'keyword',
    };
    const exact = await hits(parameters);
    expect(names(exact)).toEqual(['q8.txt', 'q7.txt', 'q6.txt']);
    const pruned = await startTestApp({
      database: t.database,
      config: { retrieval: { ...t.config.retrieval, bm25: { ...t.config.retrieval.bm25, termPostings: 3 } } },
    });
    try {
      const r = await pruned.request('/api/v1/agent/tool-calling', {
        method: 'POST',
        json: { tool_name: 'rag_search', parameters },
      });
      const results = ((await r.json()) as { results: Hit[] }).results;
      expect(names(results)).toEqual(names(exact));
      results.forEach((h, i) => expect(h.score).toBeCloseTo(exact[i]?.score ?? NaN, 6));
    } finally {
      await pruned.close();
    }
  }, 120_000);

  it('hybrid score fusion gives every dense candidate its exact BM25, so the cap does not change it', async () => {
    const parameters = { query: 'quokka on an island', collection: 'dense_terms', top_k: 8, similarity_threshold: -1 };
    const full = await hits(parameters);
    expect(full).toHaveLength(8);
    const capped = await startTestApp({
      database: t.database,
      config: { retrieval: { ...t.config.retrieval, bm25: { ...t.config.retrieval.bm25, termPostings: 1 } } },
    });
    try {
      const run = async (mode: string) => {
        const r = await capped.request('/api/v1/agent/tool-calling', {
          method: 'POST',
          json: { tool_name: 'rag_search', parameters: { ...parameters, mode } },
        });
        return ((await r.json()) as { results: Hit[] }).results;
      };
      // The cap bites: the keyword leg alone now reaches one posting per query term.
      expect((await run('keyword')).length).toBeLessThan(8);
      // Every note is a dense candidate, so each gets its full BM25 back and the order is unchanged;
      // uncapped, the keyword leg read every posting and search kept its sums instead of scoring
      // again: the same values.
      const hybrid = await run('hybrid');
      expect(names(hybrid)).toEqual(names(full));
      hybrid.forEach((h, i) => expect(h.scores.keyword).toBeCloseTo(full[i]?.scores.keyword ?? NaN, 9));
    } finally {
      await capped.close();
    }
  }, 120_000);
});

describe('RETRIEVAL_FUSION=rrf', () => {
  it('fuses the ranks of the two legs: weight / (k + rank), summed', async () => {
    const rrf = await startTestApp({
      database: t.database,
      config: { retrieval: { ...t.config.retrieval, fusion: 'rrf', rrfK: 60, weights: { dense: 1, keyword: 1 } } },
    });
    try {
      const run = async (mode: string) => {
        const r = await rrf.request('/api/v1/agent/tool-calling', {
          method: 'POST',
          json: {
            tool_name: 'rag_search',
            parameters: {
              query: 'order shipped to Rotterdam',
              collection: 'kb',
              top_k: 6,
              similarity_threshold: -1,
              mode,
            },
          },
        });
        expect(r.status).toBe(200);
        return names(((await r.json()) as { results: Hit[] }).results);
      };
      const dense = await run('dense');
      const keyword = await run('keyword');
      expect(keyword.length).toBeGreaterThan(0);
      expect(keyword.length).toBeLessThan(dense.length);
      const fused = new Map<string, number>();
      dense.forEach((n, i) => fused.set(n, (fused.get(n) ?? 0) + 1 / (60 + i + 1)));
      keyword.forEach((n, i) => fused.set(n, (fused.get(n) ?? 0) + 1 / (60 + i + 1)));
      const expected = [...fused].sort((a, b) => b[1] - a[1]).map(([n]) => n);
      expect(await run('hybrid')).toEqual(expected);
    } finally {
      await rrf.close();
    }
  }, 120_000);
});

describe('chunk storage', () => {
  it('a chunk of real length keeps its vector in the row, the text goes out of line first', async () => {
    // A real abstract: text that compression alone does not fit into the row beside the vector.
    const abstract = sharedJsonLines<{ text: string }>('scifact/corpus.jsonl')
      .map((doc) => doc.text)
      .find((x) => x.length > 3_000) as string;
    const text = abstract.slice(0, 3_000);
    const id = await upload('kb', 'abstract.txt', text);
    const [row] = await queryRows<{
      vector_bytes: number;
      text_bytes: number;
      vector_toast: number | null;
      text_toast: number | null;
    }>(
      t.database.db,
      sql`select pg_column_size(c.embedding) as vector_bytes, octet_length(c.content) as text_bytes,
                 pg_column_toast_chunk_id(c.embedding) as vector_toast, pg_column_toast_chunk_id(c.content) as text_toast
          from chunks c where c.document_id = ${id} order by octet_length(c.content) desc limit 1`,
    );
    // Text and vector together pass the 2 kB TOAST threshold ...
    expect((row?.text_bytes ?? 0) + (row?.vector_bytes ?? 0)).toBeGreaterThan(2_100);
    // ... so one of them leaves the row: the text, not the vector (with `external` it was the vector).
    expect(row?.vector_toast).toBeNull();
    expect(row?.text_toast).not.toBeNull();
  }, 120_000);
});
