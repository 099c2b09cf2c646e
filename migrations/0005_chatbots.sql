CREATE TABLE "chatbots" (
	"id" text PRIMARY KEY NOT NULL,
	"owner_key_id" text NOT NULL,
	"name" text NOT NULL,
	"chatbot_type" text NOT NULL,
	"model" text NOT NULL,
	"system_prompt" text,
	"use_rag" boolean NOT NULL,
	"rag_collection" text,
	"rag_top_k" integer NOT NULL,
	"rag_similarity_threshold" double precision NOT NULL,
	"memory_length" integer NOT NULL,
	"temperature" double precision NOT NULL,
	"max_tokens" integer NOT NULL,
	"fallback_responses" text[] NOT NULL,
	"fallback_cursor" integer DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "conversations" (
	"id" text PRIMARY KEY NOT NULL,
	"chatbot_id" text NOT NULL,
	"key_id" text NOT NULL,
	"title" text NOT NULL,
	"message_count" integer DEFAULT 0 NOT NULL,
	"lock_token" text,
	"locked_until" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "messages" (
	"id" text PRIMARY KEY NOT NULL,
	"conversation_id" text NOT NULL,
	"position" integer NOT NULL,
	"role" text NOT NULL,
	"content" text NOT NULL,
	"sources" jsonb,
	"fallback" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "conversations" ADD CONSTRAINT "conversations_chatbot_id_chatbots_id_fk" FOREIGN KEY ("chatbot_id") REFERENCES "public"."chatbots"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_conversation_id_conversations_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "public"."conversations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "chatbots_owner_created_idx" ON "chatbots" USING btree ("owner_key_id","created_at");--> statement-breakpoint
CREATE INDEX "conversations_chatbot_updated_idx" ON "conversations" USING btree ("chatbot_id","updated_at");--> statement-breakpoint
CREATE UNIQUE INDEX "messages_conversation_position_idx" ON "messages" USING btree ("conversation_id","position");