import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';

type Counter = (text: string) => number;

let loading: Promise<Counter> | undefined;

/**
 * o200k_base (GPT-4o's encoding) from gpt-tokenizer, loaded on first use only: most upstreams
 * report usage themselves, and the encoding costs memory.
 */
export function tokenCounter(): Promise<Counter> {
  loading ??= import('gpt-tokenizer/encoding/o200k_base').then((encoding) => (text: string) => {
    if (text === '') return 0;
    try {
      return encoding.countTokens(text);
    } catch {
      return Math.ceil(text.length / 4);
    }
  });
  return loading;
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content as { type?: string; text?: unknown }[]) {
    if (typeof part.text === 'string') text += part.text;
  }
  return text;
}

/** Prompt tokens as OpenAI counts them for chat: each message costs 3 more, the reply primer 3. */
export async function countPromptTokens(messages: readonly ChatCompletionMessageParam[]): Promise<number> {
  const count = await tokenCounter();
  let total = 3;
  for (const message of messages) {
    total += 3 + count(message.role) + count(textOf(message.content));
    if ('name' in message && typeof message.name === 'string') total += 1 + count(message.name);
    if ('tool_calls' in message && Array.isArray(message.tool_calls))
      total += count(JSON.stringify(message.tool_calls));
  }
  return total;
}

export async function countTextTokens(texts: readonly string[]): Promise<number> {
  const count = await tokenCounter();
  let total = 0;
  for (const text of texts) total += count(text);
  return total;
}
