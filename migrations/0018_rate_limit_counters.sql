CREATE TABLE "rate_limit_counters" (
	"counter_key" text PRIMARY KEY NOT NULL,
	"count" integer NOT NULL,
	"expires_at_ms" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "rate_limit_counters_expires_idx" ON "rate_limit_counters" USING btree ("expires_at_ms");