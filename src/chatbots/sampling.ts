import type { ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import { AppError } from '../errors.ts';

/** A chatbot's model call: what the chatbot (or its caller) asks for, before any adaptation. */
export interface ChatbotCall {
  model: string;
  messages: ChatCompletionCreateParamsNonStreaming['messages'];
  temperature: number;
  maxTokens: number;
  /** The caller set `temperature` for this request: it is theirs to see refused, never dropped. */
  callerTemperature: boolean;
  /** The caller's other OpenAI fields (`top_p`, `stop`, `seed`, `response_format`, `tools`, …), sent as they came. */
  extra?: Record<string, unknown>;
}

type Refusable = 'max_tokens' | 'temperature';

/** The upstream refused one of the parameters a chatbot sends on its own (a 400 naming it). */
function refusedParameter(error: unknown): Refusable | undefined {
  if (!(error instanceof AppError) || error.upstream?.status !== 400) return undefined;
  return error.param === 'max_tokens' || error.param === 'temperature' ? error.param : undefined;
}

/**
 * The sampling parameters of chatbot turns, fitted to what each model takes. A chatbot always
 * has a `temperature` (default 0.7) and a `max_tokens` (default 1000), but OpenAI's reasoning
 * models (o1, o3, o4-mini, gpt-5, …) refuse `max_tokens` (`unsupported_parameter`: they take
 * `max_completion_tokens`) and any temperature but their default (`unsupported_value`), so every
 * turn of such a chatbot would be a 400. When the upstream refuses one of the two with a 400
 * naming it (`param`), the turn is sent again with `max_completion_tokens` instead, or without
 * the chatbot's temperature, and the model is remembered (per process), so later turns go right
 * the first time. A temperature the caller set on the request is not dropped: its refusal is
 * the caller's answer. Any other error is the turn's, as before.
 */
export function createSampling() {
  const refusedBy = new Map<string, Set<Refusable>>();

  const paramsFor = (call: ChatbotCall): ChatCompletionCreateParamsNonStreaming => {
    const refused = refusedBy.get(call.model);
    const dropTemperature = refused?.has('temperature') === true && !call.callerTemperature;
    return {
      ...call.extra,
      model: call.model,
      messages: call.messages,
      ...(dropTemperature ? {} : { temperature: call.temperature }),
      ...(refused?.has('max_tokens') === true
        ? { max_completion_tokens: call.maxTokens }
        : { max_tokens: call.maxTokens }),
    };
  };

  return {
    /** Runs `send` with the call's parameters, adapting and sending again on a refusal it can fix. */
    async send<T>(call: ChatbotCall, send: (params: ChatCompletionCreateParamsNonStreaming) => Promise<T>): Promise<T> {
      for (;;) {
        const params = paramsFor(call);
        try {
          return await send(params);
        } catch (error) {
          const refused = refusedParameter(error);
          const known = refusedBy.get(call.model) ?? new Set<Refusable>();
          const fixable =
            (refused === 'max_tokens' && 'max_tokens' in params) ||
            (refused === 'temperature' && 'temperature' in params && !call.callerTemperature);
          if (refused === undefined || !fixable || known.has(refused)) throw error;
          refusedBy.set(call.model, known.add(refused));
        }
      }
    },
  };
}

export type Sampling = ReturnType<typeof createSampling>;
