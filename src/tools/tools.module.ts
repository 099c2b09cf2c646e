import type { Logger } from 'pino';
import type { CodeExecutionConfig, WebSearchConfig } from '../config.ts';
import type { Spawner } from '../processes/spawner.ts';
import { createCodeExecution } from './code-execution/tool.ts';
import { anyTool, type Tool } from './tool.types.ts';
import { createToolRegistry } from './tools.registry.ts';
import { toolsRoutes } from './tools.routes.ts';
import { createWebSearchTool } from './web-search/tool.ts';

export interface ToolsModuleDeps {
  /** Tools other domains provide (retrieval's `rag_search`), listed first. */
  provided: readonly Tool[];
  webSearch: WebSearchConfig;
  codeExecution: CodeExecutionConfig;
  /** Where the sandbox keeps its compiled seccomp filter. */
  dataDir: string;
  logger: Logger;
  /** Forks the sandboxed programs. */
  spawner: Spawner;
}

/** /agent/tool-calling and its tools: those provided by other domains, web_search and code_execution. */
export function createToolsModule(deps: ToolsModuleDeps) {
  // Starts probing the Python sandbox now, so start-up logs and /readyz say whether it works.
  const codeExecution = createCodeExecution({
    config: deps.codeExecution,
    dataDir: deps.dataDir,
    logger: deps.logger,
    spawner: deps.spawner,
  });
  const service = createToolRegistry([
    ...deps.provided,
    anyTool(createWebSearchTool({ config: deps.webSearch, logger: deps.logger })),
    anyTool(codeExecution.tool),
  ]);
  return { routes: toolsRoutes(service), service, codeExecution };
}
