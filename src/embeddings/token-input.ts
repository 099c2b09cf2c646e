import { AppError } from '../errors.ts';

type Decode = (ids: number[]) => string;
let loading: Promise<Decode> | undefined;

/**
 * cl100k_base, the encoding of OpenAI's embedding models, from gpt-tokenizer, loaded on first use:
 * clients such as LangChain's `OpenAIEmbeddings` send token ids of that encoding instead of text.
 */
function decoder(): Promise<Decode> {
  loading ??= import('gpt-tokenizer/encoding/cl100k_base').then((encoding) => (ids: number[]) => encoding.decode(ids));
  return loading;
}

/**
 * `/embeddings` inputs as texts: token arrays (cl100k_base ids, as OpenAI's API takes them) are
 * decoded, so every model, local or upstream, embeds the text they stand for.
 */
export async function inputTexts(input: string | string[] | number[] | number[][]): Promise<string[]> {
  if (typeof input === 'string') return [input];
  if (input.length === 0 || typeof input[0] === 'string') return input as string[];
  const arrays = typeof input[0] === 'number' ? [input as number[]] : (input as number[][]);
  const decode = await decoder();
  return arrays.map((ids, index) => {
    try {
      return decode(ids);
    } catch {
      const bad = ids.find((id) => {
        try {
          decode([id]);
          return false;
        } catch {
          return true;
        }
      });
      throw new AppError({
        code: 'invalid_value',
        message: `input${typeof input[0] === 'number' ? '' : `[${index}]`}: token ${bad ?? '?'} is not a cl100k_base token id (token arrays are read as OpenAI's embedding models' encoding)`,
        param: 'input',
      });
    }
  });
}
