import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildPrompt, type HistoryItem } from '../../src/chatbots/prompt.ts';
import { tokenCounter } from '../../src/gateway/tokens.ts';
import {
  completions,
  createChatbot,
  lastPrompt,
  startChatbotHarness,
  type ChatbotHarness,
} from './chatbots.support.ts';

/**
 * A history holding a tool-call exchange (an assistant message with `tool_calls`, then one `tool`
 * message per call), as OpenAI clients send it. Trimmed to memory_length or to the context
 * window, it must never keep a tool result whose call was cut: OpenAI answers such a prompt with
 * 400 ("messages with role 'tool' must be a response to a preceeding message with 'tool_calls'").
 */

let h: ChatbotHarness;
beforeAll(async () => {
  h = await startChatbotHarness({ models: ['mock-chat', 'mock-small'], contextWindows: { 'mock-small': 300 } });
});
afterAll(async () => {
  await h.close();
});
beforeEach(() => h.mock.reset());

const call = (id: string, name: string) => ({ id, type: 'function', function: { name, arguments: '{}' } });
const history = [
  { role: 'user', content: 'What is the weather and the time in Paris?' },
  { role: 'assistant', content: null, tool_calls: [call('call_1', 'get_weather'), call('call_2', 'get_time')] },
  { role: 'tool', tool_call_id: 'call_1', content: 'Sunny, 22 degrees' },
  { role: 'tool', tool_call_id: 'call_2', content: 'Noon' },
];
const question = { role: 'user', content: 'Thanks. Should I take a jacket?' };
const roles = () => lastPrompt(h.mock).map((m) => m.role);

describe('chatbot completions: tool-call exchanges in the history', () => {
  it.each([
    [1, ['system', 'user']],
    [2, ['system', 'user']],
    [3, ['system', 'assistant', 'tool', 'tool', 'user']],
    [10, ['system', 'user', 'assistant', 'tool', 'tool', 'user']],
  ])('memory_length %i: the model gets %j, no tool result without its call', async (memory, expected) => {
    const bot = await createChatbot(h.t, { name: `tools-${memory}`, memory_length: memory });
    const response = await completions(h.t, bot.id, { messages: [...history, question] });
    expect(response.status, await response.clone().text()).toBe(200);
    expect(roles()).toEqual(expected);
  });

  it('trimmed to the context window, the results of a dropped call go with it', async () => {
    const bot = await createChatbot(h.t, { name: 'tools-window', model: 'mock-small', max_tokens: 100 });
    const padded = [
      { ...history[0], content: `${'Some context first. '.repeat(30)}What is the weather and time?` },
      history[1],
      { ...history[2], content: 'Sunny, 22 degrees. '.repeat(20) },
      history[3],
    ];
    const response = await completions(h.t, bot.id, { messages: [...padded, question] });
    expect(response.status, await response.clone().text()).toBe(200);
    expect(roles()).toEqual(['system', 'user']);
  });
});

describe('buildPrompt', () => {
  it('drops a call and its results together, and counts them', async () => {
    const item = (message: unknown): HistoryItem => ({ message, pinned: false }) as HistoryItem;
    const prompt = buildPrompt(
      {
        systemPrompt: 'S',
        sources: undefined,
        history: [item({ role: 'user', content: 'x '.repeat(200) }), ...history.slice(1).map(item)],
        message: { role: 'user', content: 'q' },
        budget: 60,
      },
      await tokenCounter(),
    );
    expect(prompt.messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(prompt.droppedMessages).toBe(4);
  });
});
