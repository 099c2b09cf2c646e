import type { z } from 'zod';
import type { Principal } from '../keys/principal.ts';

export interface ToolContext {
  principal: Principal;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
}

/**
 * A tool callable through POST /api/v1/agent/tool-calling. Its parameters schema validates the
 * request's `parameters`; its result is the response body itself.
 */
export interface Tool<P = unknown, R = unknown> {
  readonly name: string;
  readonly description: string;
  readonly parameters: z.ZodType<P>;
  readonly result: z.ZodType<R>;
  /** A disabled tool (e.g. no search provider configured) is reported as not found. */
  enabled(): boolean;
  /** Why a disabled tool is off and what to configure: in its 404 and the start-up summary. */
  disabledReason?(): string;
  run(parameters: P, context: ToolContext): Promise<R>;
}

/** Erases a tool's parameter and result types for the registry. */
export const anyTool = <P, R>(tool: Tool<P, R>): Tool => tool;
