import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';

export type Counter = (text: string) => number;

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

/** The text of a message's content: the string itself, or its text parts joined. */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content as { type?: string; text?: unknown }[]) {
    if (typeof part.text === 'string') text += part.text;
  }
  return text;
}

/** What one message adds to a prompt as OpenAI counts chat: 3, its role, content, name and tool calls. */
export function messageTokens(count: Counter, message: ChatCompletionMessageParam): number {
  let total = 3 + count(message.role) + count(textOf(message.content));
  if ('name' in message && typeof message.name === 'string') total += 1 + count(message.name);
  if ('tool_calls' in message && Array.isArray(message.tool_calls)) total += count(JSON.stringify(message.tool_calls));
  return total;
}

/** Prompt tokens as OpenAI counts them for chat: each message costs 3 more, the reply primer 3. */
export async function countPromptTokens(messages: readonly ChatCompletionMessageParam[]): Promise<number> {
  const count = await tokenCounter();
  let total = 3;
  for (const message of messages) total += messageTokens(count, message);
  return total;
}

export async function countTextTokens(texts: readonly string[]): Promise<number> {
  const count = await tokenCounter();
  let total = 0;
  for (const text of texts) total += count(text);
  return total;
}
