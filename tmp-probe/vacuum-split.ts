import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openPglite, queryRows } from '../src/db/client.ts';
import { sql } from '../src/db/orm.ts';
import { createCollectionsRepository } from '../src/collections/collections.repository.ts';
import { createCollectionPurger } from '../src/collections/purge.ts';
import { createLogger } from '../src/logging.ts';

const [src, ...statements] = process.argv.slice(2);
const copy = mkdtempSync(path.join(tmpdir(), 'vac-'));
cpSync(src!, copy, { recursive: true });
const db = await openPglite(path.join(copy, 'pg'));
await db.migrate();
const [c] = await queryRows<{ id: string }>(db.db, sql`select id from collections where name = 'bench'`);
await createCollectionsRepository(db.db).markDeleted(c!.id);
await createCollectionPurger({ db: db.db, logger: createLogger('silent') }).runOnce();
for (const s of statements) {
  const t = performance.now();
  await db.db.execute(sql.raw(s));
  console.log(s, Math.round(performance.now() - t), 'ms');
}
await db.close();
rmSync(copy, { recursive: true, force: true });
