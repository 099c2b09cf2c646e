/**
 * Context windows (tokens) of widely used chat models, by name or by the prefix of a dated or
 * variant name (`gpt-4o-mini-2024-07-18`). Without them every model got CHATBOT_CONTEXT_WINDOW
 * (8192): a gpt-4o-mini chatbot with `max_tokens: 8100` lost every source and its history, and
 * the model was told no sources were available. Providers' published figures; `context_windows`
 * in RAGPORT_CONFIG overrides any of them.
 */
const KNOWN_WINDOWS: readonly (readonly [string, number])[] = [
  ['gpt-5', 400_000],
  ['gpt-4.1', 1_047_576],
  ['gpt-4.5', 128_000],
  ['gpt-4o', 128_000],
  ['chatgpt-4o', 128_000],
  ['gpt-4-turbo', 128_000],
  ['gpt-4-32k', 32_768],
  ['gpt-4', 8_192],
  ['gpt-3.5-turbo', 16_385],
  ['o1-mini', 128_000],
  ['o1', 200_000],
  ['o3', 200_000],
  ['o4-mini', 200_000],
  ['claude-', 200_000],
  ['gemini-1.5-pro', 2_097_152],
  ['gemini-1.5-flash', 1_048_576],
  ['gemini-2', 1_048_576],
  ['llama-3.1', 131_072],
  ['llama-3.2', 131_072],
  ['llama-3.3', 131_072],
  ['mistral-large', 131_072],
  ['mistral-small', 32_768],
  ['deepseek-chat', 65_536],
  ['deepseek-reasoner', 65_536],
];

/** The window of a model ragport knows, by the longest matching name or prefix; else undefined. */
export function knownContextWindow(model: string): number | undefined {
  // A provider prefix (`openai/gpt-4o`, `anthropic/claude-3-5-sonnet`) names the same model.
  const name = model.toLowerCase().split('/').at(-1) ?? '';
  let best: readonly [string, number] | undefined;
  for (const entry of KNOWN_WINDOWS) {
    const [prefix] = entry;
    const matches =
      name === prefix ||
      (name.startsWith(prefix) && (prefix.endsWith('-') || /^[-.:@]/.test(name.slice(prefix.length))));
    if (matches && (best === undefined || prefix.length > best[0].length)) best = entry;
  }
  return best?.[1];
}
