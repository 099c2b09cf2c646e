import type { Tool } from './tool.types.ts';

/** Every tool in one place: the endpoint, its docs and the tests all read this list. */
export function createToolRegistry(tools: readonly Tool[]) {
  const byName = new Map(tools.map((t) => [t.name, t]));
  return {
    /** The tool if it exists and is enabled. */
    find(name: string): Tool | undefined {
      const tool = byName.get(name);
      return tool?.enabled() ? tool : undefined;
    },
    /** Why a known tool is disabled, when it says. */
    disabledReason(name: string): string | undefined {
      const tool = byName.get(name);
      return tool === undefined || tool.enabled() ? undefined : tool.disabledReason?.();
    },
    all(): readonly Tool[] {
      return tools;
    },
  };
}

export type ToolRegistry = ReturnType<typeof createToolRegistry>;
