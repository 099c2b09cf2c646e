import type { Builtins } from './inspect-builtins.ts';
import type { Inspector } from './inspect.ts';

/**
 * The sandbox's `console`: `log`, `info`, `warn`, `error` and `debug` print as Node's do, that is
 * `util.format` of their arguments (printf-style `%s %d %i %f %j %o %O %c %%` in a first string,
 * strings as they are, everything else through `util.inspect`), each call one line through
 * `write`. Runs in the isolate from its source text: self-contained (see inspect.ts).
 */
export function installConsole(b: Builtins, inspector: Inspector, write: (text: string) => void): void {
  const {
    builtInObjects,
    charCodeAt,
    freeze,
    getOwnPropertyDescriptor,
    getPrototypeOf,
    hasOwn,
    isTypeError,
    jsonStringify,
    numberParseFloat,
    numberParseInt,
    regexpSplit,
    setHas,
    stringSlice,
    symbolToPrimitive,
    toNumber,
    toStr,
  } = b;
  const { inspect, formatNumber, spent, count, reset } = inspector;
  type Obj = Record<PropertyKey, unknown>;

  function hasBuiltInToString(value: object): boolean {
    let hasOwnToString = (o: unknown, k: PropertyKey) => hasOwn(o, k);
    let hasOwnToPrimitive = hasOwnToString;
    const object = value as Obj;
    if (typeof object.toString !== 'function') {
      if (typeof object[symbolToPrimitive] !== 'function') return true;
      if (hasOwn(value, symbolToPrimitive)) return false;
      hasOwnToString = () => false;
    } else if (hasOwn(value, 'toString')) {
      return false;
    } else if (typeof object[symbolToPrimitive] !== 'function') {
      hasOwnToPrimitive = () => false;
    } else if (hasOwn(value, symbolToPrimitive)) {
      return false;
    }
    let pointer: unknown = value;
    do {
      pointer = getPrototypeOf(pointer);
    } while (!hasOwnToString(pointer, 'toString') && !hasOwnToPrimitive(pointer, symbolToPrimitive));
    const descriptor = getOwnPropertyDescriptor(pointer as object, 'constructor');
    const constructor = descriptor?.value as { name?: unknown } | undefined;
    return typeof constructor === 'function' && setHas(builtInObjects, toStr(constructor.name));
  }

  let circularErrorMessage: string | undefined;
  const firstErrorLine = (error: unknown) => regexpSplit(/\n/, toStr((error as Error).message))[0];
  function tryStringify(arg: unknown): string {
    try {
      return jsonStringify(arg);
    } catch (error) {
      if (circularErrorMessage === undefined) {
        try {
          const a: Obj = {};
          a.a = a;
          jsonStringify(a);
        } catch (circularError) {
          circularErrorMessage = firstErrorLine(circularError);
        }
      }
      if (isTypeError(error) && firstErrorLine(error) === circularErrorMessage) return '[Circular]';
      throw error;
    }
  }

  function format(args: unknown[]): string {
    const first = args[0];
    let a = 0;
    let str = '';
    let join = '';
    if (typeof first === 'string') {
      if (args.length === 1) return first;
      let tempStr: string;
      let lastPos = 0;
      for (let i = 0; i < first.length - 1; i++) {
        if (charCodeAt(first, i) === 37) {
          // '%'
          const nextChar = charCodeAt(first, ++i);
          if (a + 1 !== args.length) {
            switch (nextChar) {
              case 115: {
                // 's'
                const tempArg = args[++a];
                if (typeof tempArg === 'number') tempStr = formatNumber(tempArg);
                else if (typeof tempArg === 'bigint') tempStr = `${tempArg}n`;
                else if (typeof tempArg !== 'object' || tempArg === null || !hasBuiltInToString(tempArg)) {
                  tempStr = toStr(tempArg);
                } else tempStr = inspect(tempArg, { depth: 0 });
                break;
              }
              case 106: // 'j'
                tempStr = tryStringify(args[++a]);
                break;
              case 100: {
                // 'd'
                const tempNum = args[++a];
                if (typeof tempNum === 'bigint') tempStr = `${tempNum}n`;
                else if (typeof tempNum === 'symbol') tempStr = 'NaN';
                else tempStr = formatNumber(toNumber(tempNum));
                break;
              }
              case 79: // 'O'
                tempStr = inspect(args[++a]);
                break;
              case 111: // 'o'
                tempStr = inspect(args[++a], { showHidden: true, depth: 4 });
                break;
              case 105: {
                // 'i'
                const tempInteger = args[++a];
                if (typeof tempInteger === 'bigint') tempStr = `${tempInteger}n`;
                else if (typeof tempInteger === 'symbol') tempStr = 'NaN';
                else tempStr = formatNumber(numberParseInt(tempInteger as string));
                break;
              }
              case 102: {
                // 'f'
                const tempFloat = args[++a];
                tempStr = typeof tempFloat === 'symbol' ? 'NaN' : formatNumber(numberParseFloat(tempFloat as string));
                break;
              }
              case 99: // 'c'
                a += 1;
                tempStr = '';
                break;
              case 37: // '%'
                str += stringSlice(first, lastPos, i);
                lastPos = i + 1;
                continue;
              default:
                continue;
            }
            if (lastPos !== i - 1) str += stringSlice(first, lastPos, i - 1);
            str += tempStr;
            lastPos = i + 1;
          } else if (nextChar === 37) {
            str += stringSlice(first, lastPos, i);
            lastPos = i + 1;
          }
        }
      }
      if (lastPos !== 0) {
        a++;
        join = ' ';
        if (lastPos < first.length) str += stringSlice(first, lastPos);
      }
    }
    while (a < args.length && !spent()) {
      const value = args[a];
      str += join;
      if (typeof value === 'string') {
        str += value;
        count(value.length);
      } else {
        str += inspect(value);
      }
      join = ' ';
      a++;
    }
    return str;
  }

  const log = (...args: unknown[]): void => {
    reset();
    write(`${format(args)}\n`);
  };
  (globalThis as { console?: unknown }).console = freeze({
    log,
    info: log,
    warn: log,
    error: log,
    debug: log,
  });
}
