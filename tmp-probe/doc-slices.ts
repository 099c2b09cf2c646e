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
for (const rows of [1, 1, 8, 64, 256, 1024]) {
  const t = performance.now();
  const n = await db.db.transaction((tx) => index.removeHiddenSlice(d!.id, d!.collection_id, rows, tx));
  console.log(rows, n, Math.round(performance.now() - t), 'ms');
}
const ofDocument = sql`document_id = ${d!.id} and id >= 0 and id < 999999999`;
for (const q of [
  sql`explain analyze update collection_stats set chunk_count = chunk_count - (select count(*) from chunks where ${ofDocument}), total_terms = total_terms - (select coalesce(sum(term_count), 0) from chunks where ${ofDocument}) where collection_id = ${d!.collection_id}`,
  sql`explain analyze update term_stats s set df = s.df - g.n from (select term, count(*)::int as n from chunk_terms where chunk_id in (select id from chunks where ${ofDocument} order by id limit 8) group by term) g where s.collection_id = ${d!.collection_id} and s.term = g.term`,
]) {
  const rows = await queryRows<Record<string, string>>(db.db, q);
  console.log(rows.map((r) => Object.values(r)[0]).join('\n'));
}
await db.close();
rmSync(copy, { recursive: true, force: true });
