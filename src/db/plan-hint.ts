/**
 * A statement whose text starts with this comment runs with its generic plan on the embedded
 * database (pglite-statements.ts), outside a transaction. PostgreSQL plans a prepared statement
 * afresh for every run while it judges custom plans cheaper, and for a statement whose best plan
 * does not depend on the values bound (no LIMIT, no filter among them) that is planning thrown
 * away: 3–5 ms of an unfiltered hybrid search's ranked statement in PGlite. On a PostgreSQL server
 * it is a comment.
 */
export const GENERIC_PLAN = '/* ragport: generic plan */';
