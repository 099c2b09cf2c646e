import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  completions,
  createChatbot,
  modelCalls,
  say,
  startChatbotHarness,
  type ChatbotHarness,
} from './chatbots.support.ts';

// A chatbot on a model that refuses `max_tokens` and temperatures but 1, as OpenAI's reasoning
// models do (o1, o3, gpt-5: a 400 naming the parameter): its turns are sent as the model takes
// them, learnt from the first refusals, instead of every turn failing.

let h: ChatbotHarness;
beforeAll(async () => {
  h = await startChatbotHarness({
    models: ['mock-chat', 'mock-o3', 'mock-o4', 'mock-o5'],
    mock: { reasoningModels: ['mock-o3', 'mock-o4', 'mock-o5'] },
  });
});
afterAll(() => h.close());
beforeEach(() => h.mock.reset());

/** The sampling fields of each chat request the model received. */
const sampling = () =>
  modelCalls(h.mock).map((b) => ({
    max_tokens: b.max_tokens,
    max_completion_tokens: b.max_completion_tokens,
    temperature: b.temperature,
  }));

describe('chatbots on reasoning models', () => {
  it('/chat: the first turn adapts to both refusals; later turns are sent adapted at once', async () => {
    const bot = await createChatbot(h.t, { model: 'mock-o3', max_tokens: 300 });
    const first = await say(h.t, bot.id, 'first');
    expect(first.response).toBe('re: first');
    expect(sampling()).toEqual([
      { max_tokens: 300, max_completion_tokens: undefined, temperature: 0.7 },
      { max_tokens: undefined, max_completion_tokens: 300, temperature: 0.7 },
      { max_tokens: undefined, max_completion_tokens: 300, temperature: undefined },
    ]);
    h.mock.reset();
    await say(h.t, bot.id, 'second', first.conversation_id);
    expect(sampling()).toEqual([{ max_tokens: undefined, max_completion_tokens: 300, temperature: undefined }]);
  });

  it('completions, streamed and not: adapted the same way; a caller’s own temperature is not dropped but refused', async () => {
    const bot = await createChatbot(h.t, { model: 'mock-o4' });
    const streamed = await completions(h.t, bot.id, { stream: true, messages: [{ role: 'user', content: 'hi' }] });
    expect(streamed.status).toBe(200);
    expect(await streamed.text()).toMatch(/"content":"hi"[\s\S]*data: \[DONE\]\n\n$/);
    expect(sampling().at(-1)).toEqual({ max_tokens: undefined, max_completion_tokens: 1000, temperature: undefined });

    h.mock.reset();
    const plain = await completions(h.t, bot.id, { messages: [{ role: 'user', content: 'again' }], max_tokens: 50 });
    expect(plain.status).toBe(200);
    expect(sampling()).toEqual([{ max_tokens: undefined, max_completion_tokens: 50, temperature: undefined }]);

    h.mock.reset();
    const warm = await completions(h.t, bot.id, { messages: [{ role: 'user', content: 'warm' }], temperature: 0.5 });
    expect(warm.status).toBe(400);
    expect(await warm.json()).toEqual({
      error: {
        message:
          "Unsupported value: 'temperature' does not support 0.5 with this model. Only the default (1) value is supported.",
        type: 'invalid_request_error',
        code: 'unsupported_value',
        param: 'temperature',
      },
    });
    expect(sampling()).toEqual([{ max_tokens: undefined, max_completion_tokens: 1000, temperature: 0.5 }]);
  });

  it('a caller’s temperature on a model not yet seen: refused once, and the model still learns max_completion_tokens', async () => {
    const bot = await createChatbot(h.t, { model: 'mock-o5' });
    const r = await completions(h.t, bot.id, { messages: [{ role: 'user', content: 'x' }], temperature: 1 });
    expect(r.status).toBe(200);
    expect(sampling()).toEqual([
      { max_tokens: 1000, max_completion_tokens: undefined, temperature: 1 },
      { max_tokens: undefined, max_completion_tokens: 1000, temperature: 1 },
    ]);
  });

  it('other models keep max_tokens and the chatbot’s temperature, and other 400s are not retried', async () => {
    const bot = await createChatbot(h.t, { model: 'mock-chat', temperature: 0.3, max_tokens: 64 });
    await say(h.t, bot.id, 'plain');
    expect(sampling()).toEqual([{ max_tokens: 64, max_completion_tokens: undefined, temperature: 0.3 }]);
    h.mock.reset();
    h.mock.inject({ kind: 'status', status: 400, message: 'bad request' });
    const r = await completions(h.t, bot.id, { messages: [{ role: 'user', content: 'x' }] });
    expect(r.status).toBe(400);
    expect(modelCalls(h.mock)).toHaveLength(1);
  });
});
