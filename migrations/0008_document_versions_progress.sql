ALTER TABLE "documents" ADD COLUMN "version" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "documents" ADD COLUMN "replaced_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "documents" ADD COLUMN "stage" text;--> statement-breakpoint
ALTER TABLE "documents" ADD COLUMN "chunks_embedded" integer;--> statement-breakpoint
ALTER TABLE "documents" ADD COLUMN "chunks_total" integer;--> statement-breakpoint
ALTER TABLE "ingestion_jobs" ADD COLUMN "version" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "ingestion_jobs" ADD COLUMN "name" text;--> statement-breakpoint
ALTER TABLE "ingestion_jobs" ADD COLUMN "description" text;--> statement-breakpoint
ALTER TABLE "ingestion_jobs" ADD COLUMN "metadata" jsonb;--> statement-breakpoint
ALTER TABLE "ingestion_jobs" ADD COLUMN "content_type" text;--> statement-breakpoint
ALTER TABLE "ingestion_jobs" ADD COLUMN "format" text;--> statement-breakpoint
ALTER TABLE "ingestion_jobs" ADD COLUMN "size_bytes" bigint;--> statement-breakpoint
ALTER TABLE "ingestion_jobs" ADD COLUMN "sha256" text;--> statement-breakpoint
ALTER TABLE "ingestion_jobs" ADD COLUMN "original" "bytea";