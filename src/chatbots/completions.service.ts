import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { ChatStream, GatewayService } from '../gateway/gateway.service.ts';
import { invalid } from '../errors.ts';
import type { Principal } from '../keys/principal.ts';
import type { ChatbotCompletionRequest } from './chatbots.schemas.ts';
import type { ChatbotsService } from './chatbots.service.ts';
import { fallbackCompletion, fallbackStream, withSources } from './fallback.ts';
import { textOfMessage } from './prompt.ts';
import type { ChatbotCall, Sampling } from './sampling.ts';
import { callerOf, toSource, type Turns } from './turn.ts';

export interface CompletionsServiceDeps {
  chatbots: Pick<ChatbotsService, 'requireChatbot'>;
  turns: Turns;
  gateway: Pick<GatewayService, 'complete' | 'stream'>;
  sampling: Sampling;
}

/**
 * Fields the chatbot decides (its model, the prompt, the room for the reply) or the endpoint
 * frames (the stream); every other field of the request goes to the model as the caller sent it.
 */
const FRAMED = new Set([
  'model',
  'messages',
  'temperature',
  'max_tokens',
  'max_completion_tokens',
  'stream',
  'stream_options',
]);

/** What the endpoint sends: a JSON body, or a stream to frame as SSE. */
export type CompletionOutcome =
  { kind: 'json'; body: string } | { kind: 'stream'; stream: ChatStream; includeUsage: boolean };

/**
 * POST /chatbot/external/{id}/chat/completions: OpenAI's format, the caller's messages as the
 * history; the chatbot's model, prompt, retrieval and settings (temperature and max_tokens of the
 * request win).
 */
export function createCompletionsService({ chatbots, turns, gateway, sampling }: CompletionsServiceDeps) {
  return {
    async complete(
      principal: Principal,
      chatbotId: string,
      body: ChatbotCompletionRequest,
      signal?: AbortSignal,
    ): Promise<CompletionOutcome> {
      const bot = await chatbots.requireChatbot(principal, chatbotId);
      const messages = body.messages as ChatCompletionMessageParam[];
      const message = messages.at(-1) as ChatCompletionMessageParam;
      if (message.role !== 'user') throw invalid('messages: the last message must be from the user', 'messages');
      const earlier = messages.slice(0, -1);
      const previousUser = earlier.findLast((m) => m.role === 'user');
      const maxTokens = body.max_tokens ?? body.max_completion_tokens ?? bot.maxTokens;
      const prompt = await turns.prepare(
        principal,
        bot,
        {
          // The caller's own instructions stay; the rest is history, bounded by memory_length.
          history: earlier.map((m) => ({ message: m, pinned: m.role === 'system' || m.role === 'developer' })),
          message,
          previousUserText: previousUser === undefined ? undefined : textOfMessage(previousUser),
          maxTokens,
        },
        signal,
      );
      const call: ChatbotCall = {
        model: bot.model,
        messages: prompt.messages,
        temperature: body.temperature ?? bot.temperature,
        maxTokens,
        callerTemperature: body.temperature != null,
        extra: Object.fromEntries(Object.entries(body).filter(([field]) => !FRAMED.has(field))),
      };
      const sources = prompt.sources?.map(toSource);
      const options = { signal, caller: callerOf(principal) };

      if (body.stream === true) {
        let stream: ChatStream;
        try {
          stream = await sampling.send(call, (params) => gateway.stream({ ...params, stream: true }, options));
        } catch (error) {
          stream = fallbackStream(bot.model, await turns.fallbackFor(bot, error, signal));
        }
        return {
          kind: 'stream',
          stream: withSources(stream, sources),
          includeUsage: body.stream_options?.include_usage === true,
        };
      }
      let completion: object;
      try {
        completion = (await sampling.send(call, (params) => gateway.complete(params, options))).completion;
      } catch (error) {
        completion = fallbackCompletion(bot.model, await turns.fallbackFor(bot, error, signal));
      }
      return { kind: 'json', body: JSON.stringify(sources === undefined ? completion : { ...completion, sources }) };
    },
  };
}

export type CompletionsService = ReturnType<typeof createCompletionsService>;
