import { expect } from 'vitest';
import { sql } from '../../src/db/orm.ts';
import { queryRows, type Db } from '../../src/db/client.ts';

/**
 * A collection's search index bookkeeping against what is there: its statistics row beside the
 * chunks and postings it counts, the chunk counts its documents claim, the versions still being
 * written in slices, and every term whose document frequency differs from its postings (a zero
 * stays behind for a term whose last chunk went; it reads as absent).
 */
export async function indexBookkeeping(db: Db, collection: string) {
  const [row] = await queryRows<{
    stats_chunks: number;
    chunks: number;
    stats_terms: number;
    terms: number;
    postings: number;
    expected: number;
    staged: number;
  }>(
    db,
    sql`select s.chunk_count::int as stats_chunks, s.total_terms::int as stats_terms,
               (select count(*) from chunks where collection_id = c.id)::int as chunks,
               (select coalesce(sum(term_count), 0) from chunks where collection_id = c.id)::int as terms,
               (select coalesce(sum(tf), 0) from chunk_terms where collection_id = c.id)::int as postings,
               (select coalesce(sum(chunk_count), 0) from documents where collection_id = c.id)::int as expected,
               (select count(*) from chunk_staging where collection_id = c.id)::int as staged
        from collections c join collection_stats s on s.collection_id = c.id where c.name = ${collection}`,
  );
  if (!row) throw new Error(`no statistics for collection ${collection}`);
  const drift = await queryRows<{ term: string; df: number; actual: number }>(
    db,
    sql`select coalesce(s.term, p.term) as term, coalesce(s.df, 0) as df, coalesce(p.n, 0) as actual
        from (select term, df from term_stats where collection_id = (select id from collections where name = ${collection})) s
        full join (select term, count(*)::int as n from chunk_terms
                   where collection_id = (select id from collections where name = ${collection}) group by term) p
          on p.term = s.term
        -- A statistics row no posting backs (df 0, a term every chunk holding it has left) is drift too.
        where s.term is null or p.term is null or s.df <> p.n`,
  );
  return { ...row, drift };
}

/** The bookkeeping, asserted true: statistics equal to the chunks and postings they count, no term drifting. */
export async function expectConsistentIndex(db: Db, collection: string) {
  const row = await indexBookkeeping(db, collection);
  expect(row.stats_chunks).toBe(row.chunks);
  expect(row.stats_terms).toBe(row.terms);
  expect(row.postings).toBe(row.terms);
  expect(row.drift).toEqual([]);
  return row;
}
