import { expect } from 'vitest';
import type { TestApp } from './app.ts';

/** The chunk contents any search mode returns for the query: the collection's top 50 of each, no threshold. */
export async function foundContents(t: TestApp, collection: string, query: string): Promise<Set<string>> {
  const contents = new Set<string>();
  for (const mode of ['dense', 'keyword', 'hybrid']) {
    const r = await t.request('/api/v1/agent/tool-calling', {
      method: 'POST',
      json: {
        tool_name: 'rag_search',
        parameters: { query, collection, mode, top_k: 50, similarity_threshold: -1 },
      },
    });
    expect(r.status).toBe(200);
    for (const hit of ((await r.json()) as { results: { content: string }[] }).results) contents.add(hit.content);
  }
  return contents;
}
