import { integer, pgTable, text, uniqueIndex } from '../orm.ts';
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
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [uniqueIndex('collections_name_idx').on(t.name)],
);

export type CollectionRow = typeof collections.$inferSelect;
