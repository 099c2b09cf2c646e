/**
 * A document's original bytes are kept for reprocessing (and a replace's, on its job until it
 * commits). On the embedded database they are stored as they are: compressing a text upload held
 * its one session ~45 ms a MB while every request waited. A PostgreSQL server compresses them, in
 * the uploading request's own session.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import { sql } from '../../src/db/orm.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

it('are stored byte for byte: as they are on the embedded database, compressed on a server', async () => {
  expect((await app.request('/api/v1/rag/collections', { method: 'POST', json: { name: 'originals' } })).status).toBe(
    201,
  );
  // ~600 kB of text that compresses well.
  const content = Array.from(
    { length: 6_000 },
    (_, i) => `Line ${i}: the quick brown fox jumps over the lazy dog.`,
  ).join('\n');
  const upload = await app.request('/api/v1/rag/collections/originals/documents', {
    method: 'POST',
    json: { name: 'big.md', content },
  });
  expect(upload.status).toBe(202);
  const { id } = (await upload.json()) as { id: string };

  const [row] = await queryRows<{ stored: number; bytes: number; same: boolean }>(
    app.database.db,
    sql`select pg_column_size(original) as stored, octet_length(original) as bytes,
               original = convert_to(${content}, 'UTF8') as same
        from documents where id = ${id}`,
  );
  expect(row?.same).toBe(true);
  expect(row?.bytes).toBe(Buffer.byteLength(content));
  const storage = await queryRows<{ table: string; storage: string }>(
    app.database.db,
    sql`select attrelid::regclass::text as table, attstorage as storage from pg_attribute
        where attname = 'original' and attrelid in ('documents'::regclass, 'ingestion_jobs'::regclass) order by 1`,
  );
  if (app.database.kind === 'pglite') {
    expect(row?.stored).toBeGreaterThanOrEqual(row?.bytes ?? Infinity);
    expect(storage).toEqual([
      { table: 'documents', storage: 'e' },
      { table: 'ingestion_jobs', storage: 'e' },
    ]);
  } else {
    expect(row?.stored).toBeLessThan((row?.bytes ?? 0) / 2);
    expect(storage.map((s) => s.storage)).toEqual(['x', 'x']);
  }
});
