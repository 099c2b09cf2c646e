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
          const why = tools.disabledReason(request.body.tool_name);
          const message = `Tool '${request.body.tool_name}' not found${why === undefined ? '' : `: ${why}`}`;
          throw new AppError({ code: 'not_found', message });
        }
        const parsed = tool.parameters.safeParse(request.body.parameters);
        if (!parsed.success)
          throw invalidFromIssues(parsed.error.issues, { prefix: 'parameters.', whole: 'parameters' });
        return tool.run(parsed.data, { principal: principalOf(request), signal: clientGone(reply) });
      },
    );
  };
}
