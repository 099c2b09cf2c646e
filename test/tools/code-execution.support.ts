import { readdirSync, readFileSync } from 'node:fs';
import { loadConfig, type CodeExecutionConfig } from '../../src/config.ts';
import type { CodeExecutionResult } from '../../src/tools/code-execution/tool.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

export interface Harness {
  t: TestApp;
  key: string;
  config: CodeExecutionConfig;
  call(parameters: Record<string, unknown>): Promise<Response>;
  /** Runs code and expects a 200: every contained failure is still a result. */
  run(code: string, options?: { language?: 'python' | 'javascript'; timeout?: number }): Promise<CodeExecutionResult>;
}

export async function startHarness(overrides: Partial<CodeExecutionConfig> = {}): Promise<Harness> {
  const config = { ...loadConfig({}).codeExecution, ...overrides };
  const t = await startTestApp({ config: { codeExecution: config } });
  // Premium (300 a minute): the hostile suite sends more than a standard key's 60 in a minute.
  const { key } = await t.createKey({ name: 'tools', scopes: ['tools'], tier: 'premium' });
  const call = (parameters: Record<string, unknown>) =>
    t.request('/api/v1/agent/tool-calling', { method: 'POST', key, json: { tool_name: 'code_execution', parameters } });
  return {
    t,
    key,
    config,
    call,
    async run(code, options = {}) {
      const response = await call({ code, language: options.language ?? 'python', timeout: options.timeout ?? 5 });
      const text = await response.text();
      if (response.status !== 200) throw new Error(`expected 200, got ${response.status}: ${text}`);
      return JSON.parse(text) as CodeExecutionResult;
    },
  };
}

/** Processes on the host owned by the sandbox's uids (none must outlive a call). */
export function sandboxProcesses(uidBase: number, count: number): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
      if (uid >= uidBase && uid <= uidBase + count) found.push(`${pid} ${/^Name:\s+(.*)$/m.exec(status)?.[1]}`);
    } catch {
      // exited while we looked
    }
  }
  return found;
}

/** Python source from lines, so tests read like the programs they run. */
export const py = (...lines: string[]) => lines.join('\n');

export async function eventually(check: () => boolean, timeoutMs = 3000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return check();
}
