import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { AppError } from '../errors.ts';
import { MAX_INPUT_TOKENS, MAX_TOTAL_TOKENS } from './embeddings.schemas.ts';

type Decode = (ids: number[]) => string;
let loading: Promise<Decode> | undefined;

/** Token ids decoded between two turns of the event loop (~1 ms of work). */
const IDS_PER_TURN = 20_000;

/**
 * cl100k_base, the encoding of OpenAI's embedding models, from gpt-tokenizer, loaded on first use:
 * clients such as LangChain's `OpenAIEmbeddings` send token ids of that encoding instead of text.
 */
function decoder(): Promise<Decode> {
  loading ??= import('gpt-tokenizer/encoding/cl100k_base').then((encoding) => (ids: number[]) => encoding.decode(ids));
  return loading;
}

/**
 * `/embeddings` inputs as texts: token arrays (cl100k_base ids, as OpenAI's API takes them, at
 * most MAX_TOTAL_TOKENS in all) are decoded, so every model, local or upstream, embeds the text
 * they stand for. Arrays are decoded a few at a time, yielding to the event loop between.
 */
export async function inputTexts(input: string | string[] | number[] | number[][]): Promise<string[]> {
  if (typeof input === 'string') return [input];
  if (input.length === 0 || typeof input[0] === 'string') return input as string[];
  const single = typeof input[0] === 'number';
  const arrays = single ? [input as number[]] : (input as number[][]);
  const longest = arrays.findIndex((ids) => ids.length > MAX_INPUT_TOKENS);
  if (longest >= 0) {
    throw new AppError({
      code: 'invalid_value',
      message: `input${single ? '' : `[${longest}]`}: at most ${MAX_INPUT_TOKENS} token ids per input`,
      param: 'input',
    });
  }
  if (arrays.reduce((n, ids) => n + ids.length, 0) > MAX_TOTAL_TOKENS) {
    throw new AppError({
      code: 'invalid_value',
      message: `input is too large: at most ${MAX_TOTAL_TOKENS} token ids in total`,
      param: 'input',
    });
  }
  const decode = await decoder();
  const texts: string[] = [];
  let sinceYield = 0;
  for (const [index, ids] of arrays.entries()) {
    if (sinceYield >= IDS_PER_TURN) {
      await yieldToLoop();
      sinceYield = 0;
    }
    sinceYield += ids.length;
    try {
      texts.push(decode(ids));
    } catch {
      // Which id: each array holds at most 8,192, so one by one is cheap on this rare path.
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
        message: `input${single ? '' : `[${index}]`}: token ${bad ?? '?'} is not a cl100k_base token id (token arrays are read as OpenAI's embedding models' encoding)`,
        param: 'input',
      });
    }
  }
  return texts;
}
