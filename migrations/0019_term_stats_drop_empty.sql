-- Statistics rows of terms no chunk holds any more (df down to 0), left by document deletes and
-- replaces before they were removed with their last chunk.
DELETE FROM "term_stats" WHERE "df" <= 0;
