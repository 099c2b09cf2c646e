import type { SQL } from 'drizzle-orm';
import type * as DrizzlePgCore from 'drizzle-orm/pg-core';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/client.ts';
import { createRetrievalRepository, type SearchQuery } from '../../src/retrieval/retrieval.repository.ts';

/**
 * The embedded database runs statements in the order they are sent, on one session whose
 * `hnsw.ef_search` a search sets when it needs another value. A stand-in for that session records
 * what it is sent and answers each statement a little later, as the database thread does.
 */
// drizzle's CommonJS build, as src/db/orm.ts loads it.
const { PgDialect } = createRequire(import.meta.url)('drizzle-orm/pg-core') as typeof DrizzlePgCore;

function recordingSession() {
  const dialect = new PgDialect();
  const sent: string[] = [];
  const db = {
    async execute(query: SQL) {
      sent.push(dialect.sqlToQuery(query).sql);
      await sleep(5);
      return { rows: [] };
    },
  };
  return { db: db as unknown as Db, sent };
}

const query = (candidates: number): SearchQuery => ({
  collectionId: 'col_turns',
  dimensions: 3,
  vector: new Float32Array([1, 0, 0]),
  terms: [],
  mode: 'dense',
  candidates,
  topK: 10,
  threshold: -1,
  filter: undefined,
  exact: false,
  fusion: 'score',
  rrfK: 60,
  weights: { dense: 1, keyword: 0 },
  efSearch: 100,
  bm25: { k1: 0.9, b: 0.4 },
  keyword: { ids: [] },
});

describe('searches sharing the embedded database’s one session', () => {
  it('each runs with its own ef_search: its SET and its statement are never split by another search', async () => {
    const { db, sent } = recordingSession();
    const repo = createRetrievalRepository(db, { oneSession: true });
    // The session at 100 first; then a search needing 400 and one needing 100 (no SET) at once.
    await repo.search(query(50));
    sent.length = 0;
    await Promise.all([repo.search(query(400)), repo.search(query(50)), repo.search(query(400))]);
    const efs = [] as number[];
    let current: number | undefined = 100;
    for (const text of sent) {
      const set = /^set hnsw\.ef_search = (\d+)$/.exec(text);
      if (set) current = Number(set[1]);
      else if (text.includes('order by')) {
        const limit = Number(/limit (\d+)\)/.exec(text)?.[1]);
        efs.push(limit);
        // A statement asking for `limit` dense candidates runs with ef_search max(100, limit).
        expect(current).toBe(Math.max(100, limit));
      }
    }
    expect(efs.sort((a, b) => a - b)).toEqual([50, 400, 400]);
  });
});
