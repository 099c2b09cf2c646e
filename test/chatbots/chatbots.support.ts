import { expect } from 'vitest';
import type { ChatbotRecord, ChatResponse } from '../../src/chatbots/chatbots.schemas.ts';
import { startTestApp, type TestApp, type TestAppOptions } from '../support/app.ts';
import { startMockUpstream, type MockUpstream, type MockUpstreamOptions } from '../support/mock-upstream.ts';

export interface ChatbotHarness {
  t: TestApp;
  mock: MockUpstream;
  close(): Promise<void>;
}

type Body = Record<string, unknown>;
type UpstreamMessage = { role: string; content: string };

/** The text of the last message the model was sent. */
export const lastContent = (body: Body): string => {
  const messages = body.messages as UpstreamMessage[];
  return String(messages.at(-1)?.content);
};

/** The gateway configuration chatbot tests use: the mock, quick retries, a short timeout. */
export const mockGateway = (
  mock: MockUpstream,
  models: string[] = ['mock-chat'],
  contextWindows: Record<string, number> = {},
) => ({
  providers: [{ name: 'mock', base_url: mock.url, models, max_retries: 1, timeout_ms: 400 }],
  retry: { base_delay_ms: 1, max_delay_ms: 5 },
  circuit_breaker: { failure_threshold: 1_000 },
  context_windows: contextWindows,
});

/** A ragport over a mock model that answers `re: <the last message>`, so every reply names its turn. */
export async function startChatbotHarness(
  options: {
    mock?: MockUpstreamOptions;
    app?: Omit<TestAppOptions, 'gateway'>;
    models?: string[];
    /** `context_windows` of the gateway configuration (RAGPORT_CONFIG). */
    contextWindows?: Record<string, number>;
  } = {},
): Promise<ChatbotHarness> {
  const models = options.models ?? ['mock-chat'];
  const mock = await startMockUpstream({ models, reply: (body) => `re: ${lastContent(body)}`, ...options.mock });
  const t = await startTestApp({ ...options.app, gateway: mockGateway(mock, models, options.contextWindows) });
  return {
    t,
    mock,
    close: async () => {
      await t.close();
      await mock.close();
    },
  };
}

export async function createChatbot(t: TestApp, body: Body = {}, key?: string): Promise<ChatbotRecord> {
  const response = await t.request('/api/v1/chatbot/create', {
    method: 'POST',
    json: { name: 'bot', model: 'mock-chat', ...body },
    ...(key === undefined ? {} : { key }),
  });
  expect(response.status, await response.clone().text()).toBe(201);
  return (await response.json()) as ChatbotRecord;
}

export const sendChat = (t: TestApp, chatbotId: string, json: Body, key?: string) =>
  t.request(`/api/v1/chatbot/external/${chatbotId}/chat`, {
    method: 'POST',
    json,
    ...(key === undefined ? {} : { key }),
  });

/** One /chat turn that must succeed. */
export async function say(t: TestApp, chatbotId: string, message: string, conversationId?: string, key?: string) {
  const response = await sendChat(t, chatbotId, { message, conversation_id: conversationId }, key);
  expect(response.status, await response.clone().text()).toBe(200);
  return (await response.json()) as ChatResponse;
}

export const completions = (t: TestApp, chatbotId: string, json: Body, key?: string) =>
  t.request(`/api/v1/chatbot/external/${chatbotId}/chat/completions`, {
    method: 'POST',
    json: { model: 'ignored', ...json },
    ...(key === undefined ? {} : { key }),
  });

/** The chat requests the model received, oldest first. */
export const modelCalls = (mock: MockUpstream) =>
  mock.requests.filter((r) => r.method === 'POST' && r.path === '/v1/chat/completions').map((r) => r.body as Body);

/** The messages of the last chat request the model received. */
export const lastPrompt = (mock: MockUpstream): UpstreamMessage[] =>
  (modelCalls(mock).at(-1)?.messages ?? []) as UpstreamMessage[];
