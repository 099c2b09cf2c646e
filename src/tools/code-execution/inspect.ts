import type { Builtins } from './inspect-builtins.ts';
import type { InspectContext, Layout } from './inspect-layout.ts';
import type { Strings } from './inspect-strings.ts';

/**
 * `util.inspect` for the JavaScript sandbox's `console`, running INSIDE the isolate: javascript-isolate.ts
 * evaluates the source text of this and the other inspect*.ts factories there (`String(fn)`), so
 * the formatting is type-checked and linted here yet costs the program's own time and memory
 * there. Each factory must stay self-contained: no imports but types, no module-level values,
 * nothing of Node — what it needs comes in as arguments.
 *
 * A port of the common cases of Node 24's lib/internal/util/inspect.js with its default options
 * (depth 2, 100 entries per array, Set or Map, 10,000 characters per nested string, 80 columns,
 * compact 3); functions keep Node's names so the two can be compared. What a plain isolate cannot
 * see is left out: a Proxy is inspected through its traps, promise states and iterator contents
 * are not shown, `util.inspect.custom` is not called, `showHidden` (`%o`) lists no prototype
 * properties, and string widths use Node's table for builds without ICU.
 *
 * Bounded whatever it is given: depth bounds nesting, 100 entries bound each array, Set and Map,
 * and past `limit` characters (the host keeps no more, then stops the program) no entry is added.
 * Arrays longer than 100,000 are not enumerated for holes or extra properties: Object.keys makes a
 * string of every index (a 10 million element array would have taken ~300 MB for it).
 */
export function createInspect(b: Builtins, s: Strings, layout: Layout, limit: number) {
  const {
    objectKeys,
    getOwnPropertyNames,
    getOwnPropertySymbols,
    getOwnPropertyDescriptor,
    getPrototypeOf,
    objectIs,
    isArray,
    min,
    numberIsNaN,
    toNumber,
    toStr,
    arrayJoin,
    arrayIncludes,
    arrayIndexOf,
    arraySplice,
    arrayPop,
    push,
    stringSlice,
    stringIncludes,
    stringIndexOf,
    stringRepeat,
    padStart,
    startsWith,
    endsWith,
    toLowerCase,
    replaceAll,
    regexpExec,
    regexpReplace,
    regexpSplit,
    regexpToString,
    objectToString,
    hasOwn,
    propertyIsEnumerable,
    functionToString,
    hasInstance,
    setSize,
    setValues,
    setIteratorNext,
    mapSize,
    mapEntries,
    mapIteratorNext,
    mapGet,
    mapSet,
    newMap,
    dateGetTime,
    dateToISOString,
    dateToString,
    errorToString,
    numberValueOf,
    stringValueOf,
    booleanValueOf,
    bigintValueOf,
    symbolValueOf,
    symbolToString,
    typedArrayLength,
    typedArrayTag,
    newUint8Array,
    newRegExp,
    symbolIterator,
    symbolToStringTag,
    AsyncFunctionPrototype,
    GeneratorFunctionPrototype,
    AsyncGeneratorFunctionPrototype,
    wellKnownPrototypes,
    isSet,
    isMap,
    isDate,
    isRegExp,
    isTypedArray,
    isArrayBuffer,
    isSharedArrayBuffer,
    isDataView,
    isWeakMap,
    isWeakSet,
    isNumberObject,
    isStringObject,
    isBooleanObject,
    isBigIntObject,
    isSymbolObject,
    isPromise,
    isArgumentsObject,
    isError,
    isStackOverflowError,
  } = b;
  const { strEscape, escapeFn, strEscapeSequencesReplacer } = s;
  const { reduceToSingleString } = layout;
  type Obj = Record<PropertyKey, unknown>;
  type Ctx = InspectContext;
  const isBoxedPrimitive = (value: object) =>
    isNumberObject(value) ||
    isStringObject(value) ||
    isBooleanObject(value) ||
    isBigIntObject(value) ||
    isSymbolObject(value);

  // Node's defaults, which its console uses.
  const maxArrayLength = 100;
  const maxStringLength = 10_000;
  const breakLength = 80;
  /** Longest array whose own keys are listed (holes, extra properties); see above. */
  const maxEnumeratedArrayLength = 100_000;
  const kObjectType = 0;
  const kArrayType = 1;
  const kArrayExtrasType = 2;
  const kMinLineLength = 16;
  const keyStrRegExp = /^[a-zA-Z_][a-zA-Z_0-9]*$/;
  const numberRegExp = /^(0|[1-9][0-9]*)$/;
  const classRegExp = /^(\s+[^(]*?)\s*{/;
  const stripCommentsRegExp = /(\/\/.*?\n)|(\/\*(.|\n)*?\*\/)/g;

  // Characters of the output so far, reset by each console call: every formatted value counts its
  // length once (a key, once its own), so the output is at least this long. Entries stop being
  // added past `limit`: the host would cut the output there anyway.
  let produced = 0;
  const spent = () => produced > limit;

  function constructorNameOf(value: object): string {
    // What V8's GetConstructorName answers for objects whose prototype chain names none.
    if (isArray(value)) return 'Array';
    return typeof value === 'function' ? 'Function' : 'Object';
  }

  function isInstanceof(object: object, proto: unknown): boolean {
    try {
      return object instanceof (proto as new () => unknown);
    } catch {
      return false;
    }
  }

  function getConstructorName(obj: object, ctx: Ctx, recurseTimes: number): string | null {
    let firstProto: object | null | undefined;
    const tmp = obj;
    let current: object | null = obj;
    while (current) {
      const known = mapGet(wellKnownPrototypes, current);
      if (known !== undefined && hasInstance(known.constructor, tmp)) return known.name;
      const descriptor = getOwnPropertyDescriptor(current, 'constructor');
      const value = descriptor?.value as { name?: unknown } | undefined;
      if (typeof value === 'function' && value.name !== '' && isInstanceof(tmp, value)) return toStr(value.name);
      current = getPrototypeOf(current);
      if (firstProto === undefined) firstProto = current;
    }
    if (firstProto === null || firstProto === undefined) return null;
    const res = constructorNameOf(tmp);
    if (recurseTimes > ctx.depth) return `${res} <Complex prototype>`;
    const protoConstr = getConstructorName(firstProto, ctx, recurseTimes + 1);
    if (protoConstr === null) return `${res} <${inspect(firstProto, { depth: -1 })}>`;
    return `${res} <${protoConstr}>`;
  }

  function getPrefix(constructor: string | null, tag: string, fallback: string, size = ''): string {
    if (constructor === null) {
      if (tag !== '' && fallback !== tag) return `[${fallback}${size}: null prototype] [${tag}] `;
      return `[${fallback}${size}: null prototype] `;
    }
    let result = `${constructor}${size} `;
    if (tag !== '') {
      const position = stringIndexOf(constructor, tag);
      if (position === -1) {
        result += `[${tag}] `;
      } else {
        const endPos = position + tag.length;
        const next = constructor[endPos] as string;
        if (endPos !== constructor.length && next === toLowerCase(next)) result += `[${tag}] `;
      }
    }
    return result;
  }

  function getKeys(value: object, showHidden: boolean): PropertyKey[] {
    const symbols = getOwnPropertySymbols(value);
    const keys: PropertyKey[] = showHidden ? getOwnPropertyNames(value) : objectKeys(value);
    for (let i = 0; i < symbols.length; i++) {
      const symbol = symbols[i] as symbol;
      if (showHidden || propertyIsEnumerable(value, symbol)) push(keys, symbol);
    }
    return keys;
  }

  /** Node's getOwnNonIndexProperties, for arrays and typed arrays of at most 100,000 elements. */
  function getOwnNonIndexProperties(value: object, length: number, showHidden: boolean): PropertyKey[] {
    const keys: PropertyKey[] = [];
    if (length > maxEnumeratedArrayLength) {
      if (showHidden && isArray(value)) push(keys, 'length');
      return keys;
    }
    const all = getKeys(value, showHidden);
    for (let i = 0; i < all.length; i++) {
      const key = all[i] as PropertyKey;
      if (typeof key === 'string' && regexpExec(numberRegExp, key) !== null && toNumber(key) < 2 ** 32 - 1) continue;
      push(keys, key);
    }
    return keys;
  }

  function getCtxStyle(value: object, constructor: string | null, tag: string): string {
    let fallback = '';
    if (constructor === null) {
      fallback = constructorNameOf(value);
      if (fallback === tag) fallback = 'Object';
    }
    return getPrefix(constructor, tag, fallback);
  }

  function formatValue(ctx: Ctx, value: unknown, recurseTimes: number, typedArray?: boolean): string {
    if (typeof value !== 'object' && typeof value !== 'function') {
      const result = formatPrimitive(value, ctx);
      produced += result.length;
      return result;
    }
    if (value === null) {
      produced += 4;
      return 'null';
    }
    if (arrayIncludes(ctx.seen, value)) {
      let index = 1;
      if (ctx.circular === undefined) {
        ctx.circular = newMap();
        mapSet(ctx.circular, value, index);
      } else {
        const known = mapGet(ctx.circular, value);
        if (known === undefined) {
          index = mapSize(ctx.circular) + 1;
          mapSet(ctx.circular, value, index);
        } else {
          index = known;
        }
      }
      produced += 13;
      return `[Circular *${index}]`;
    }
    // What the value's entries added meanwhile is part of its result: count the whole once.
    const before = produced;
    const result = formatRaw(ctx, value, recurseTimes, typedArray);
    produced = before + result.length;
    return result;
  }

  type Formatter = (ctx: Ctx, value: object, recurseTimes: number) => string[];

  function formatRaw(ctx: Ctx, value: object, recurseTimes: number, typedArray?: boolean): string {
    let keys: PropertyKey[] = [];
    const constructor = getConstructorName(value, ctx, recurseTimes);
    let tag: unknown = '';
    try {
      tag = (value as Obj)[symbolToStringTag];
    } catch {
      // Ignore a getter that throws.
    }
    if (
      typeof tag !== 'string' ||
      (tag !== '' && (ctx.showHidden ? hasOwn : propertyIsEnumerable)(value, symbolToStringTag))
    ) {
      tag = '';
    }
    const tagName = tag as string;
    let base = '';
    let formatter: Formatter = () => [];
    let braces: [string, string] = ['{', '}'];
    let noIterator = true;
    let extrasType = kObjectType;
    let extraKeys: string[] | undefined;

    if (symbolIterator in value || constructor === null) {
      noIterator = false;
      if (isArray(value)) {
        const prefix =
          constructor !== 'Array' || tagName !== ''
            ? getPrefix(constructor, tagName, 'Array', `(${value.length})`)
            : '';
        keys = getOwnNonIndexProperties(value, value.length, ctx.showHidden);
        braces = [`${prefix}[`, ']'];
        if (value.length === 0 && keys.length === 0) return `${braces[0]}]`;
        extrasType = kArrayExtrasType;
        formatter = formatArray;
      } else if (isSet(value)) {
        const size = setSize(value);
        const prefix = getPrefix(constructor, tagName, 'Set', `(${size})`);
        keys = getKeys(value, ctx.showHidden);
        formatter = formatSet;
        if (size === 0 && keys.length === 0) return `${prefix}{}`;
        braces = [`${prefix}{`, '}'];
      } else if (isMap(value)) {
        const size = mapSize(value);
        const prefix = getPrefix(constructor, tagName, 'Map', `(${size})`);
        keys = getKeys(value, ctx.showHidden);
        formatter = formatMap;
        if (size === 0 && keys.length === 0) return `${prefix}{}`;
        braces = [`${prefix}{`, '}'];
      } else if (isTypedArray(value)) {
        const size = typedArrayLength(value);
        keys = getOwnNonIndexProperties(value, size, ctx.showHidden);
        const fallback = constructor === null ? (typedArrayTag(value) as string) : '';
        const prefix = getPrefix(constructor, tagName, fallback, `(${size})`);
        braces = [`${prefix}[`, ']'];
        if (size === 0 && keys.length === 0 && !ctx.showHidden) return `${braces[0]}]`;
        formatter = (_c, v) => formatTypedArray(v as ArrayLike<number | bigint>, size);
        extrasType = kArrayExtrasType;
        if (ctx.showHidden) {
          extraKeys = ['BYTES_PER_ELEMENT', 'length', 'byteLength', 'byteOffset', 'buffer'];
          typedArray = true;
        }
      } else {
        noIterator = true;
      }
    }
    if (noIterator) {
      keys = getKeys(value, ctx.showHidden);
      braces = ['{', '}'];
      if (typeof value === 'function') {
        base = getFunctionBase(ctx, value, constructor, tagName);
        if (keys.length === 0) return base;
      } else if (constructor === 'Object') {
        if (isArgumentsObject(value)) braces[0] = '[Arguments] {';
        else if (tagName !== '') braces[0] = `${getPrefix(constructor, tagName, 'Object')}{`;
        if (keys.length === 0) return `${braces[0]}}`;
      } else if (isRegExp(value)) {
        base = regexpToString(constructor !== null ? (value as RegExp) : newRegExp(value as RegExp));
        const prefix = getPrefix(constructor, tagName, 'RegExp');
        if (prefix !== 'RegExp ') base = `${prefix}${base}`;
        if (keys.length === 0 || recurseTimes > ctx.depth) return base;
      } else if (isDate(value)) {
        base = numberIsNaN(dateGetTime(value)) ? dateToString(value) : dateToISOString(value);
        const prefix = getPrefix(constructor, tagName, 'Date');
        if (prefix !== 'Date ') base = `${prefix}${base}`;
        if (keys.length === 0) return base;
      } else if (isError(value)) {
        base = formatError(value as Error, constructor, tagName, ctx, keys);
        if (keys.length === 0) return base;
      } else if (isArrayBuffer(value) || isSharedArrayBuffer(value)) {
        const prefix = getPrefix(constructor, tagName, isArrayBuffer(value) ? 'ArrayBuffer' : 'SharedArrayBuffer');
        if (typedArray === undefined) {
          formatter = formatArrayBuffer;
        } else if (keys.length === 0) {
          return `${prefix}{ byteLength: ${formatNumber((value as ArrayBuffer).byteLength)} }`;
        }
        braces[0] = `${prefix}{`;
        extraKeys = ['byteLength'];
      } else if (isDataView(value)) {
        braces[0] = `${getPrefix(constructor, tagName, 'DataView')}{`;
        extraKeys = ['byteLength', 'byteOffset', 'buffer'];
      } else if (isPromise(value)) {
        // An isolate cannot read a promise's state without waiting for it.
        braces[0] = `${getPrefix(constructor, tagName, 'Promise')}{`;
        formatter = () => ['<state unknown>'];
      } else if (isWeakSet(value)) {
        braces[0] = `${getPrefix(constructor, tagName, 'WeakSet')}{`;
        formatter = () => ['<items unknown>'];
      } else if (isWeakMap(value)) {
        braces[0] = `${getPrefix(constructor, tagName, 'WeakMap')}{`;
        formatter = () => ['<items unknown>'];
      } else if (isBoxedPrimitive(value)) {
        base = getBoxedBase(value, ctx, keys, constructor, tagName);
        if (keys.length === 0) return base;
      } else {
        if (keys.length === 0) return `${getCtxStyle(value, constructor, tagName)}{}`;
        braces[0] = `${getCtxStyle(value, constructor, tagName)}{`;
      }
    }

    if (recurseTimes > ctx.depth) {
      const name = stringSlice(getCtxStyle(value, constructor, tagName), 0, -1);
      return constructor !== null ? `[${name}]` : name;
    }
    recurseTimes += 1;
    push(ctx.seen, value);
    ctx.currentDepth = recurseTimes;
    let output: string[];
    const indentationLvl = ctx.indentationLvl;
    try {
      output = formatter(ctx, value, recurseTimes);
      for (let i = 0; extraKeys !== undefined && i < extraKeys.length; i++) {
        const key = extraKeys[i] as string;
        produced += key.length;
        ctx.indentationLvl += 2;
        const str = formatValue(ctx, (value as Obj)[key], recurseTimes, typedArray);
        ctx.indentationLvl -= 2;
        push(output, `[${key}]: ${str}`);
      }
      for (let i = 0; i < keys.length && !spent(); i++) {
        push(output, formatProperty(ctx, value, recurseTimes, keys[i] as PropertyKey, extrasType));
      }
    } catch (error) {
      if (!isStackOverflowError(error)) throw error;
      arrayPop(ctx.seen);
      ctx.indentationLvl = indentationLvl;
      const name = stringSlice(getCtxStyle(value, constructor, tagName), 0, -1);
      return `[${name}: Inspection interrupted prematurely. Maximum call stack size exceeded.]`;
    }
    if (ctx.circular !== undefined) {
      const index = mapGet(ctx.circular, value);
      if (index !== undefined) {
        const reference = `<ref *${index}>`;
        base = base === '' ? reference : `${reference} ${base}`;
      }
    }
    arrayPop(ctx.seen);
    return reduceToSingleString(ctx, output, base, braces, extrasType === kArrayExtrasType, recurseTimes, value);
  }

  function getBoxedBase(value: object, ctx: Ctx, keys: PropertyKey[], constructor: string | null, tag: string) {
    let primitive: unknown;
    let type: string;
    if (isNumberObject(value)) {
      primitive = numberValueOf(value);
      type = 'Number';
    } else if (isStringObject(value)) {
      primitive = stringValueOf(value);
      type = 'String';
      arraySplice(keys, 0, (primitive as string).length);
    } else if (isBooleanObject(value)) {
      primitive = booleanValueOf(value);
      type = 'Boolean';
    } else if (isBigIntObject(value)) {
      primitive = bigintValueOf(value);
      type = 'BigInt';
    } else {
      primitive = symbolValueOf(value);
      type = 'Symbol';
    }
    let base = `[${type}`;
    if (type !== constructor) base += constructor === null ? ' (null prototype)' : ` (${constructor})`;
    base += `: ${formatPrimitive(primitive, ctx)}]`;
    if (tag !== '' && tag !== constructor) base += ` [${tag}]`;
    return base;
  }

  function getClassBase(value: { name?: unknown }, constructor: string | null, tag: string): string {
    const name = (hasOwn(value, 'name') && (value.name as string)) || '(anonymous)';
    let base = `class ${name}`;
    if (constructor !== 'Function' && constructor !== null) base += ` [${constructor}]`;
    if (tag !== '' && constructor !== tag) base += ` [${tag}]`;
    if (constructor !== null) {
      const superName = (getPrototypeOf(value) as { name?: unknown }).name;
      if (superName) base += ` extends ${toStr(superName)}`;
    } else {
      base += ' extends [null prototype]';
    }
    return `[${base}]`;
  }

  function getFunctionBase(ctx: Ctx, value: { name?: unknown }, constructor: string | null, tag: string): string {
    const stringified = functionToString(value);
    if (startsWith(stringified, 'class') && stringified[stringified.length - 1] === '}') {
      const slice = stringSlice(stringified, 5, -1);
      const bracketIndex = stringIndexOf(slice, '{');
      if (
        bracketIndex !== -1 &&
        (!stringIncludes(stringSlice(slice, 0, bracketIndex), '(') ||
          regexpExec(classRegExp, regexpReplace(stripCommentsRegExp, slice, '')) !== null)
      ) {
        return getClassBase(value, constructor, tag);
      }
    }
    let type = 'Function';
    const proto = getPrototypeOf(value) as unknown;
    if (proto === GeneratorFunctionPrototype) type = `Generator${type}`;
    if (proto === AsyncFunctionPrototype) type = `Async${type}`;
    if (proto === AsyncGeneratorFunctionPrototype) type = `AsyncGenerator${type}`;
    let base = `[${type}`;
    if (constructor === null) base += ' (null prototype)';
    if (value.name === '') base += ' (anonymous)';
    else base += `: ${typeof value.name === 'string' ? value.name : formatValue(ctx, value.name, 0)}`;
    base += ']';
    if (constructor !== type && constructor !== null) base += ` ${constructor}`;
    if (tag !== '' && constructor !== tag) base += ` [${tag}]`;
    return base;
  }

  function identicalSequenceRange(a: string[], b: string[]): [number, number] {
    for (let i = 0; i < a.length - 3; i++) {
      const pos = arrayIndexOf(b, a[i]);
      if (pos !== -1) {
        const rest = b.length - pos;
        if (rest > 3) {
          let len = 1;
          const maxLen = min(a.length - i, rest);
          while (maxLen > len && a[i + len] === b[pos + len]) len++;
          if (len > 3) return [len, i];
        }
      }
    }
    return [0, 0];
  }

  function getStackString(ctx: Ctx, error: Error): string {
    let stack: unknown;
    try {
      stack = error.stack;
    } catch {
      // A stack getter that throws is ignored.
    }
    if (stack) {
      if (typeof stack === 'string') return stack;
      push(ctx.seen, error);
      ctx.indentationLvl += 4;
      const result = formatValue(ctx, stack, 0);
      ctx.indentationLvl -= 4;
      arrayPop(ctx.seen);
      return `${errorToString(error)}\n    ${result}`;
    }
    return errorToString(error);
  }

  function getStackFrames(ctx: Ctx, error: Error, stack: string): string[] {
    const frames = regexpSplit(/\n/, stack);
    let cause: unknown;
    try {
      cause = error.cause;
    } catch {
      // A cause getter that throws is ignored.
    }
    // Frames the cause's stack repeats are summed up.
    if (cause != null && typeof cause === 'object' && isError(cause)) {
      const causeStack = getStackString(ctx, cause as Error);
      const causeStackStart = stringIndexOf(causeStack, '\n    at');
      if (causeStackStart !== -1) {
        const causeFrames = regexpSplit(/\n/, stringSlice(causeStack, causeStackStart + 1));
        const range = identicalSequenceRange(frames, causeFrames);
        const len = range[0];
        const offset = range[1];
        if (len > 0) {
          const skipped = len - 2;
          arraySplice(frames, offset + 1, skipped, `    ... ${skipped} lines matching cause stack trace ...`);
        }
      }
    }
    return frames;
  }

  function improveStack(stack: string, constructor: string | null, name: string, tag: string): string {
    let len = name.length;
    if (
      constructor === null ||
      (endsWith(name, 'Error') &&
        startsWith(stack, name) &&
        (stack.length === len || stack[len] === ':' || stack[len] === '\n'))
    ) {
      let fallback = 'Error';
      if (constructor === null) {
        const start =
          regexpExec(/^([A-Z][a-z_ A-Z0-9[\]()-]+)(?::|\n {4}at)/, stack) ??
          regexpExec(/^([a-z_A-Z0-9-]*Error)$/, stack);
        fallback = start?.[1] ?? '';
        len = fallback.length;
        fallback ||= 'Error';
      }
      const prefix = stringSlice(getPrefix(constructor, tag, fallback), 0, -1);
      if (name !== prefix) {
        if (stringIncludes(prefix, name)) {
          stack = len === 0 ? `${prefix}: ${stack}` : `${prefix}${stringSlice(stack, len)}`;
        } else {
          stack = `${prefix} [${name}]${stringSlice(stack, len)}`;
        }
      }
    }
    return stack;
  }

  function formatError(error: Error, constructor: string | null, tag: string, ctx: Ctx, keys: PropertyKey[]): string {
    let message: unknown;
    let name: unknown;
    let stack: string;
    try {
      stack = getStackString(ctx, error);
    } catch {
      return objectToString(error);
    }
    let messageIsGetterThatThrows = false;
    try {
      message = error.message;
    } catch {
      messageIsGetterThatThrows = true;
    }
    let nameIsGetterThatThrows = false;
    try {
      name = error.name;
    } catch {
      nameIsGetterThatThrows = true;
    }
    if (!ctx.showHidden && keys.length !== 0) {
      const stackIndex = arrayIndexOf(keys, 'stack');
      if (stackIndex !== -1) arraySplice(keys, stackIndex, 1);
      if (!messageIsGetterThatThrows) {
        const index = arrayIndexOf(keys, 'message');
        if (index !== -1 && (typeof message !== 'string' || stringIncludes(stack, message))) {
          arraySplice(keys, index, 1);
        }
      }
      if (!nameIsGetterThatThrows) {
        const index = arrayIndexOf(keys, 'name');
        if (index !== -1 && (typeof name !== 'string' || stringIncludes(stack, name))) arraySplice(keys, index, 1);
      }
    }
    name ??= 'Error';
    if (hasOwn(error, 'cause') && (keys.length === 0 || !arrayIncludes(keys, 'cause'))) push(keys, 'cause');
    try {
      const errors = (error as { errors?: unknown }).errors;
      if (isArray(errors) && hasOwn(error, 'errors') && (keys.length === 0 || !arrayIncludes(keys, 'errors'))) {
        push(keys, 'errors');
      }
    } catch {
      // An errors getter that throws is ignored.
    }
    stack = improveStack(stack, constructor, toStr(name), tag);
    let pos: number = (message ? stringIndexOf(stack, message as string) : 0) || -1;
    if (pos !== -1) pos += (message as string).length;
    const stackStart = stringIndexOf(stack, '\n    at', pos);
    if (stackStart === -1) {
      stack = `[${stack}]`;
    } else {
      const lines = getStackFrames(ctx, error, stringSlice(stack, stackStart + 1));
      stack = `${stringSlice(stack, 0, stackStart)}\n${arrayJoin(lines, '\n')}`;
    }
    if (ctx.indentationLvl !== 0) {
      stack = replaceAll(stack, '\n', `\n${stringRepeat(' ', ctx.indentationLvl)}`);
    }
    return stack;
  }

  const remainingText = (remaining: number) => `... ${remaining} more item${remaining > 1 ? 's' : ''}`;

  function formatNumber(number: number): string {
    return objectIs(number, -0) ? '-0' : `${number}`;
  }

  function formatPrimitive(value: unknown, ctx: Ctx): string {
    if (typeof value === 'string') {
      let trailer = '';
      if (value.length > maxStringLength) {
        const remaining = value.length - maxStringLength;
        value = stringSlice(value, 0, maxStringLength);
        trailer = `... ${remaining} more character${remaining > 1 ? 's' : ''}`;
      }
      const str = value as string;
      if (str.length > kMinLineLength && str.length > breakLength - ctx.indentationLvl - 4) {
        const lines = regexpSplit(/(?<=\n)/, str);
        for (let i = 0; i < lines.length; i++) lines[i] = strEscape(lines[i] as string);
        return arrayJoin(lines, ` +\n${stringRepeat(' ', ctx.indentationLvl + 2)}`) + trailer;
      }
      return strEscape(str) + trailer;
    }
    if (typeof value === 'number') return formatNumber(value);
    if (typeof value === 'bigint') return `${value}n`;
    if (typeof value === 'boolean') return `${value}`;
    if (typeof value === 'undefined') return 'undefined';
    return symbolToString(value);
  }

  function formatSpecialArray(
    ctx: Ctx,
    value: unknown[],
    recurseTimes: number,
    maxLength: number,
    output: string[],
    i: number,
  ) {
    let index = i;
    if (value.length <= maxEnumeratedArrayLength) {
      const keys = objectKeys(value);
      for (; i < keys.length && output.length < maxLength && !spent(); i++) {
        const key = keys[i] as string;
        const tmp = +key;
        if (tmp > 2 ** 32 - 2) break;
        if (`${index}` !== key) {
          if (regexpExec(numberRegExp, key) === null) break;
          const emptyItems = tmp - index;
          push(output, `<${emptyItems} empty item${emptyItems > 1 ? 's' : ''}>`);
          index = tmp;
          if (output.length === maxLength) break;
        }
        push(output, formatProperty(ctx, value, recurseTimes, key, kArrayType));
        index++;
      }
    } else {
      // Too long to list its keys: probe the indices, at most 100,000 of them.
      let holes = 0;
      for (let probes = 0; index < value.length && output.length < maxLength && probes < 100_000; probes++) {
        if (hasOwn(value, index)) {
          if (holes > 0) push(output, `<${holes} empty item${holes > 1 ? 's' : ''}>`);
          holes = 0;
          if (output.length === maxLength) break;
          push(output, formatProperty(ctx, value, recurseTimes, `${index}`, kArrayType));
        } else {
          holes++;
        }
        index++;
      }
      index -= holes;
      if (holes > 0 && index + holes === value.length && output.length < maxLength) {
        push(output, `<${holes} empty item${holes > 1 ? 's' : ''}>`);
        index += holes;
      }
    }
    const remaining = value.length - index;
    if (output.length !== maxLength) {
      if (remaining > 0) push(output, `<${remaining} empty item${remaining > 1 ? 's' : ''}>`);
    } else if (remaining > 0) {
      push(output, remainingText(remaining));
    }
    return output;
  }

  function formatArrayBuffer(_ctx: Ctx, value: object): string[] {
    let buffer: Uint8Array;
    try {
      buffer = newUint8Array(value as ArrayBuffer);
    } catch {
      return ['(detached)'];
    }
    let str = '';
    const shown = min(maxArrayLength, buffer.length);
    for (let i = 0; i < shown; i++) {
      str += `${i === 0 ? '' : ' '}${padStart((buffer[i] as number).toString(16), 2, '0')}`;
    }
    const remaining = buffer.length - maxArrayLength;
    if (remaining > 0) str += ` ... ${remaining} more byte${remaining > 1 ? 's' : ''}`;
    return [`[Uint8Contents]: <${str}>`];
  }

  function formatArray(ctx: Ctx, value: object, recurseTimes: number): string[] {
    const array = value as unknown[];
    const valLen = array.length;
    const len = min(maxArrayLength, valLen);
    const remaining = valLen - len;
    const output: string[] = [];
    for (let i = 0; i < len && !spent(); i++) {
      const desc = getOwnPropertyDescriptor(array, i);
      if (desc === undefined) return formatSpecialArray(ctx, array, recurseTimes, len, output, i);
      push(output, formatProperty(ctx, array, recurseTimes, i, kArrayType, desc));
    }
    if (remaining > 0) push(output, remainingText(remaining));
    return output;
  }

  function formatTypedArray(value: ArrayLike<number | bigint>, length: number): string[] {
    const maxLength = min(maxArrayLength, length);
    const output: string[] = [];
    for (let i = 0; i < maxLength; i++) {
      const element = value[i];
      output[i] = typeof element === 'number' ? formatNumber(element) : `${element}n`;
    }
    if (length > maxLength) output[maxLength] = remainingText(length - maxLength);
    return output;
  }

  function formatSet(ctx: Ctx, value: object, recurseTimes: number): string[] {
    const length = setSize(value);
    const maxLength = min(maxArrayLength, length);
    const output: string[] = [];
    ctx.indentationLvl += 2;
    const iterator = setValues(value);
    for (let i = 0; i < maxLength && !spent(); i++) {
      const next = setIteratorNext(iterator);
      if (next.done) break;
      push(output, formatValue(ctx, next.value, recurseTimes));
    }
    if (length > maxLength) push(output, remainingText(length - maxLength));
    ctx.indentationLvl -= 2;
    return output;
  }

  function formatMap(ctx: Ctx, value: object, recurseTimes: number): string[] {
    const length = mapSize(value);
    const maxLength = min(maxArrayLength, length);
    const output: string[] = [];
    ctx.indentationLvl += 2;
    const iterator = mapEntries(value);
    for (let i = 0; i < maxLength && !spent(); i++) {
      const next = mapIteratorNext(iterator);
      if (next.done) break;
      const entry = next.value;
      push(output, `${formatValue(ctx, entry[0], recurseTimes)} => ${formatValue(ctx, entry[1], recurseTimes)}`);
    }
    if (length > maxLength) push(output, remainingText(length - maxLength));
    ctx.indentationLvl -= 2;
    return output;
  }

  function formatProperty(
    ctx: Ctx,
    value: object,
    recurseTimes: number,
    key: PropertyKey,
    type: number,
    desc?: PropertyDescriptor,
  ): string {
    let str: string;
    desc ??= getOwnPropertyDescriptor(value, key) ?? { value: undefined, enumerable: true };
    if (desc.value !== undefined) {
      ctx.indentationLvl += 2;
      str = formatValue(ctx, desc.value, recurseTimes);
      ctx.indentationLvl -= 2;
    } else if (desc.get !== undefined) {
      str = desc.set !== undefined ? '[Getter/Setter]' : '[Getter]';
    } else if (desc.set !== undefined) {
      str = '[Setter]';
    } else {
      str = 'undefined';
    }
    if (type === kArrayType) return str;
    let name: string;
    if (typeof key === 'symbol') {
      name = regexpReplace(strEscapeSequencesReplacer, symbolToString(key), escapeFn);
    } else if (regexpExec(keyStrRegExp, toStr(key)) !== null) {
      name = key === '__proto__' ? "['__proto__']" : toStr(key);
    } else {
      name = strEscape(toStr(key));
    }
    produced += name.length;
    if (desc.enumerable === false) name = `[${name}]`;
    return `${name}: ${str}`;
  }

  function inspect(value: unknown, options: { depth?: number; showHidden?: boolean } = {}): string {
    const ctx: Ctx = {
      seen: [],
      circular: undefined,
      indentationLvl: 0,
      currentDepth: 0,
      depth: options.depth ?? 2,
      showHidden: options.showHidden ?? false,
      breakLength,
      compact: 3,
      maxArrayLength,
    };
    return formatValue(ctx, value, 0);
  }

  return {
    inspect,
    formatNumber,
    /** Whether the current console call has produced more than `limit` characters. */
    spent,
    count: (characters: number) => {
      produced += characters;
    },
    reset: () => {
      produced = 0;
    },
  };
}

export type Inspector = ReturnType<typeof createInspect>;
