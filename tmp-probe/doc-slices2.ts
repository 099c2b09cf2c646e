import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openPglite, queryRows } from '../src/db/client.ts';
import { sql } from '../src/db/orm.ts';
import { createIndexRepository } from '../src/retrieval/index.repository.ts';

const copy = mkdtempSync(path.join(tmpdir(), 'slc-'));
cpSync(process.argv[2]!, copy, { recursive: true });
const db = await openPglite(path.join(copy, 'pg'));
await db.migrate();
await db.db.execute(sql`vacuum analyze`);
const [d] = await queryRows<{ id: string; collection_id: string }>(db.db, sql`select id, collection_id from documents order by chunk_count desc limit 1`);
const index = createIndexRepository(db.db);
await db.db.transaction((tx) => index.hideDocument(d!.id, d!.collection_id, tx));
for (let k = 0; k < 3; k++) {
  const doomed = await queryRows<{ id: string }>(db.db, sql`select id from chunks where document_id = ${d!.id} order by position limit 4`);
  const ids = sql.param(doomed.map((c) => Number(c.id)));
  const steps: [string, ReturnType<typeof sql>][] = [
    ['staging', sql`select first_chunk_id from chunk_staging where document_id = ${d!.id}`],
    ['select', sql`select id, term_count from chunks where document_id = ${d!.id} order by position limit 4`],
    ['cstats', sql`update collection_stats set chunk_count = chunk_count - 0 where collection_id = ${d!.collection_id}`],
    ['tstats', sql`insert into term_stats (collection_id, term, df) select ${d!.collection_id}, term, -count(*)::int from chunk_terms where chunk_id = any(${ids}::bigint[]) group by term on conflict (collection_id, term) do update set df = term_stats.df + excluded.df`],
    ['delpost', sql`delete from chunk_terms where chunk_id = any(${ids}::bigint[])`],
    ['delete', sql`delete from chunks where id = any(${ids}::bigint[])`],
  ];
  const out: string[] = [];
  for (const [name, q] of steps) {
    const t = performance.now();
    await db.db.execute(q);
    out.push(`${name} ${(performance.now() - t).toFixed(1)}`);
  }
  console.log(out.join(' | '));
}
const [exp] = [await queryRows<Record<string, string>>(db.db, sql`explain analyze select id, term_count from chunks where document_id = ${d!.id} order by position limit 4`)];
console.log(exp.map((r) => Object.values(r)[0]).join('\n'));
await db.close();
rmSync(copy, { recursive: true, force: true });
