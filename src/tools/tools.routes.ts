import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { clientGone } from '../http/abort.ts';
import { principalOf } from '../http/auth.ts';
import { AppError, invalidFromIssues } from '../http/errors.ts';
import type { ToolRegistry } from './tools.registry.ts';

const toolCall = z.object({
  tool_name: z.string().min(1).max(100),
  parameters: z.record(z.string(), z.unknown()),
});

function documentedToolCall(tools: ToolRegistry): z.ZodType {
  const calls: z.ZodType[] = tools
    .all()
    .map((t) => z.object({ tool_name: z.literal(t.name), parameters: t.parameters }));
  return calls.length > 1 ? z.union(calls as [z.ZodType, z.ZodType, ...z.ZodType[]]) : (calls[0] ?? toolCall);
}

export function toolsRoutes(tools: ToolRegistry) {
  /** Tools whose being off was logged already. */
  const explained = new Set<string>();
  return async (fastify: FastifyInstance) => {
    const results = tools.all().map((t) => t.result);
    const response =
      results.length > 1 ? z.union(results as [z.ZodType, z.ZodType, ...z.ZodType[]]) : (results[0] ?? z.unknown());
    fastify.withTypeProvider<ZodTypeProvider>().post(
      '/api/v1/agent/tool-calling',
      {
        config: {
          access: 'tools',
          family: 'simple',
          // Validated in two steps (the envelope here, `parameters` by the tool), documented as
          // one body per tool so that clients and fuzzers see each tool's real parameters.
          documentedBody: { 'application/json': documentedToolCall(tools) },
        },
        schema: {
          operationId: 'callTool',
          tags: ['tools'],
          description: `Runs one tool directly. Tools: ${tools
            .all()
            .map((t) => `\`${t.name}\` (${t.description})`)
            .join('; ')}.`,
          body: toolCall,
          response: { 200: response },
        },
      },
      async (request, reply) => {
        const tool = tools.find(request.body.tool_name);
        if (!tool) {
          // The contract's exact message; why a known tool is off goes to the operator's log (once
          // per tool, not once per call) and the start-up summary, where it can be acted on.
          const why = tools.disabledReason(request.body.tool_name);
          if (why !== undefined && !explained.has(request.body.tool_name)) {
            explained.add(request.body.tool_name);
            request.log.warn({ tool: request.body.tool_name }, `tool ${request.body.tool_name} called but off: ${why}`);
          }
          throw new AppError({ code: 'not_found', message: `Tool '${request.body.tool_name}' not found` });
        }
        const parsed = tool.parameters.safeParse(request.body.parameters);
        if (!parsed.success)
          throw invalidFromIssues(parsed.error.issues, { prefix: 'parameters.', whole: 'parameters' });
        return tool.run(parsed.data, { principal: principalOf(request), signal: clientGone(reply) });
      },
    );
  };
}
