import type { Builtins } from './inspect-builtins.ts';
import type { Strings } from './inspect-strings.ts';

/** What one util.inspect call keeps while it formats: Node's `ctx`, with the options it uses. */
export interface InspectContext {
  seen: object[];
  circular: Map<object, number> | undefined;
  indentationLvl: number;
  currentDepth: number;
  depth: number;
  showHidden: boolean;
  breakLength: number;
  compact: number;
  maxArrayLength: number;
}

/**
 * How `util.inspect` lays out a container's entries: on one line when they fit in
 * `breakLength` columns, arrays of more than six short entries in aligned columns, otherwise one
 * entry a line (Node 24's reduceToSingleString and groupArrayElements). Runs in the isolate from
 * its source text: self-contained (see inspect.ts).
 */
export function createLayout(b: Builtins, s: Strings) {
  const { arrayJoin, floor, max, min, padEnd, padStart, push, round, sqrt, stringIncludes, stringRepeat } = b;
  const { getStringWidth } = s;

  function groupArrayElements(ctx: InspectContext, output: string[], value: unknown[] | undefined): string[] {
    let totalLength = 0;
    let maxLength = 0;
    let outputLength = output.length;
    // The "... more items" entry is not part of the grid.
    if (ctx.maxArrayLength < output.length) outputLength--;
    const separatorSpace = 2;
    const dataLen: number[] = [];
    for (let i = 0; i < outputLength; i++) {
      const len = getStringWidth(output[i] as string);
      dataLen[i] = len;
      totalLength += len + separatorSpace;
      if (maxLength < len) maxLength = len;
    }
    const actualMax = maxLength + separatorSpace;
    if (actualMax * 3 + ctx.indentationLvl < ctx.breakLength && (totalLength / actualMax > 5 || maxLength <= 6)) {
      const averageBias = sqrt(actualMax - totalLength / output.length);
      const biasedMax = max(actualMax - 3 - averageBias, 1);
      const columns = min(
        round(sqrt(2.5 * biasedMax * outputLength) / biasedMax),
        floor((ctx.breakLength - ctx.indentationLvl) / actualMax),
        ctx.compact * 4,
        15,
      );
      if (columns <= 1) return output;
      const tmp: string[] = [];
      const maxLineLength: number[] = [];
      for (let i = 0; i < columns; i++) {
        let lineMaxLength = 0;
        for (let j = i; j < output.length; j += columns) {
          if ((dataLen[j] as number) > lineMaxLength) lineMaxLength = dataLen[j] as number;
        }
        maxLineLength[i] = lineMaxLength + separatorSpace;
      }
      let order = padStart;
      if (value !== undefined) {
        for (let i = 0; i < output.length; i++) {
          if (typeof value[i] !== 'number' && typeof value[i] !== 'bigint') {
            order = padEnd;
            break;
          }
        }
      }
      for (let i = 0; i < outputLength; i += columns) {
        const maxIndex = min(i + columns, outputLength);
        let str = '';
        let j = i;
        for (; j < maxIndex - 1; j++) {
          const padding = (maxLineLength[j - i] as number) + (output[j] as string).length - (dataLen[j] as number);
          str += order(`${output[j]}, `, padding, ' ');
        }
        if (order === padStart) {
          const padding =
            (maxLineLength[j - i] as number) + (output[j] as string).length - (dataLen[j] as number) - separatorSpace;
          str += padStart(output[j] as string, padding, ' ');
        } else {
          str += output[j];
        }
        push(tmp, str);
      }
      if (outputLength < output.length) push(tmp, output[outputLength] as string);
      output = tmp;
    }
    return output;
  }

  function isBelowBreakLength(ctx: InspectContext, output: string[], start: number, base: string): boolean {
    let totalLength = output.length + start;
    if (totalLength + output.length > ctx.breakLength) return false;
    for (let i = 0; i < output.length; i++) {
      totalLength += (output[i] as string).length;
      if (totalLength > ctx.breakLength) return false;
    }
    return base === '' || !stringIncludes(base, '\n');
  }

  function reduceToSingleString(
    ctx: InspectContext,
    output: string[],
    base: string,
    braces: [string, string],
    arrayLike: boolean,
    recurseTimes: number,
    value?: object,
  ): string {
    const entries = output.length;
    if (arrayLike && entries > 6) output = groupArrayElements(ctx, output, value as unknown[]);
    if (ctx.currentDepth - recurseTimes < ctx.compact && entries === output.length) {
      const start = output.length + ctx.indentationLvl + braces[0].length + base.length + 10;
      if (isBelowBreakLength(ctx, output, start, base)) {
        const joinedOutput = arrayJoin(output, ', ');
        if (!stringIncludes(joinedOutput, '\n')) {
          return `${base ? `${base} ` : ''}${braces[0]} ${joinedOutput} ${braces[1]}`;
        }
      }
    }
    const indentation = `\n${stringRepeat(' ', ctx.indentationLvl)}`;
    return `${base ? `${base} ` : ''}${braces[0]}${indentation}  ${arrayJoin(output, `,${indentation}  `)}${indentation}${braces[1]}`;
  }

  return { reduceToSingleString };
}

export type Layout = ReturnType<typeof createLayout>;
