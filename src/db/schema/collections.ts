import { integer, pgTable, sql, text, timestamp, uniqueIndex } from '../orm.ts';
import { createdAt, updatedAt } from '../columns.ts';

export const collections = pgTable(
  'collections',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull(),
    description: text('description'),
    /** The model name the client asked for, e.g. text-embedding-ada-002. */
    embeddingModel: text('embedding_model').notNull(),
    /** Where that name resolved at creation: `local` or an upstream provider's name. */
    embeddingProvider: text('embedding_provider').notNull(),
    /** The model that really embeds this collection's chunks and queries, fixed for its lifetime. */
    embeddingModelResolved: text('embedding_model_resolved').notNull(),
    dimensions: integer('dimensions').notNull(),
    /**
     * Set when the collection is deleted: from then on no request sees it (its name is free
     * again), and the purger (collections/purge.ts) removes its rows in short transactions,
     * the collection's own last.
     */
    deletedAt: timestamp('deleted_at', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    uniqueIndex('collections_name_idx')
      .on(t.name)
      .where(sql`${t.deletedAt} is null`),
  ],
);

export type CollectionRow = typeof collections.$inferSelect;
