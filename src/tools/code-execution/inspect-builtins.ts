/**
 * The built-ins the sandbox's `console` formats with, taken inside the isolate before the program
 * runs (as Node's primordials are): a program that replaces `Object.keys`, `Array.prototype.join`
 * or `Map.prototype.get` still has its values printed. Like the rest of inspect*.ts it runs in the
 * isolate from its source text, so it must stay self-contained (see inspect.ts).
 */
export function captureBuiltins() {
  const { apply } = Reflect;
  /** `method(String.prototype, 'slice')(s, 1)` calls the original `slice` on `s`. */
  const method = <P, K extends keyof P>(proto: P, key: K) => {
    const fn = proto[key] as (this: P, ...args: unknown[]) => unknown;
    return ((self: P, ...args: unknown[]) => apply(fn, self, args)) as P[K] extends (...args: infer A) => infer R
      ? (self: P, ...args: A) => R
      : never;
  };
  /** An accessor's getter, as a function of the receiver. */
  const getter = <R>(proto: object, key: PropertyKey) => {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called on receivers of our choosing
    const get = Object.getOwnPropertyDescriptor(proto, key)?.get as (this: unknown) => R;
    return (self: unknown): R => apply(get, self, []);
  };
  /** Whether a built-in accepts the value as its receiver: a brand check with no side effect. */
  const brand =
    (check: (value: object) => unknown) =>
    (value: object): boolean => {
      try {
        check(value);
        return true;
      } catch {
        return false;
      }
    };

  const TypedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype) as object;
  const setSize = getter<number>(Set.prototype, 'size');
  const mapSize = getter<number>(Map.prototype, 'size');
  const dateGetTime = method(Date.prototype, 'getTime');
  const typedArrayTag = getter<string | undefined>(TypedArrayPrototype, Symbol.toStringTag);
  const regexpSource = getter<string>(RegExp.prototype, 'source');
  const arrayBufferByteLength = getter<number>(ArrayBuffer.prototype, 'byteLength');
  const sharedArrayBufferByteLength =
    typeof SharedArrayBuffer === 'function'
      ? getter<number>(SharedArrayBuffer.prototype as object, 'byteLength')
      : undefined;
  const objectToString = method(Object.prototype, 'toString');
  const hasInstance = method(Function.prototype, Symbol.hasInstance);
  const weakMapHas = method(WeakMap.prototype, 'has');
  const weakSetHas = method(WeakSet.prototype, 'has');
  const numberValueOf = method(Number.prototype, 'valueOf');
  const stringValueOf = method(String.prototype, 'valueOf');
  const booleanValueOf = method(Boolean.prototype, 'valueOf');
  const bigintValueOf = method(BigInt.prototype, 'valueOf');
  const symbolValueOf = method(Symbol.prototype, 'valueOf');
  const regexpExec = method(RegExp.prototype, 'exec');
  const {
    Error: ErrorCtor,
    Map: MapCtor,
    Set: SetCtor,
    RangeError: RangeErrorCtor,
    TypeError: TypeErrorCtor,
  } = globalThis;

  // Node's builtInObjects: the constructors a value's toString may come from for `%s`.
  const builtInObjects = new SetCtor<string>();
  const globals = Object.getOwnPropertyNames(globalThis);
  for (let i = 0; i < globals.length; i++) {
    const name = globals[i] as string;
    if (regexpExec(/^[A-Z][a-zA-Z0-9]+$/, name) !== null) builtInObjects.add(name);
  }
  // Node's wellKnownPrototypes: names that hold however the program changed `constructor`.
  const wellKnownPrototypes = new MapCtor<unknown, { name: string; constructor: unknown }>();
  const known: [string, { prototype: unknown }][] = [
    ['Array', Array],
    ['ArrayBuffer', ArrayBuffer],
    ['Function', Function],
    ['Map', Map],
    ['Set', Set],
    ['Object', Object],
    ['TypedArray', Object.getPrototypeOf(Uint8Array) as { prototype: unknown }],
    ['RegExp', RegExp],
    ['Date', Date],
    ['DataView', DataView],
    ['Error', Error],
    ['AggregateError', AggregateError],
    ['RangeError', RangeError],
    ['TypeError', TypeError],
    ['Boolean', Boolean],
    ['Number', Number],
    ['String', String],
    ['Promise', Promise],
    ['WeakMap', WeakMap],
    ['WeakSet', WeakSet],
  ];
  for (let i = 0; i < known.length; i++) {
    const [name, constructor] = known[i] as [string, { prototype: unknown }];
    wellKnownPrototypes.set(constructor.prototype, { name, constructor });
  }

  return {
    objectKeys: Object.keys,
    getOwnPropertyNames: Object.getOwnPropertyNames,
    getOwnPropertySymbols: Object.getOwnPropertySymbols,
    getOwnPropertyDescriptor: Object.getOwnPropertyDescriptor as (
      o: object,
      k: PropertyKey,
    ) => PropertyDescriptor | undefined,
    getPrototypeOf: Object.getPrototypeOf as (o: unknown) => object | null,
    objectIs: Object.is,
    isArray: Array.isArray as (value: unknown) => value is unknown[],
    freeze: Object.freeze,
    floor: Math.floor,
    max: Math.max,
    min: Math.min,
    round: Math.round,
    sqrt: Math.sqrt,
    numberIsNaN: Number.isNaN,
    numberParseInt: Number.parseInt,
    numberParseFloat: Number.parseFloat,
    toNumber: Number,
    toStr: String,
    jsonStringify: JSON.stringify as (value: unknown) => string,
    arrayJoin: method(Array.prototype as unknown[], 'join'),
    arrayIncludes: method(Array.prototype as unknown[], 'includes'),
    arrayIndexOf: method(Array.prototype as unknown[], 'indexOf'),
    arraySplice: method(Array.prototype as unknown[], 'splice'),
    arrayPop: method(Array.prototype as unknown[], 'pop'),
    /** Array.prototype.push without the method a program may have replaced. */
    push: <T>(array: T[], value: T) => {
      array[array.length] = value;
    },
    stringSlice: method(String.prototype, 'slice'),
    stringIncludes: method(String.prototype, 'includes'),
    stringIndexOf: method(String.prototype, 'indexOf'),
    charCodeAt: method(String.prototype, 'charCodeAt'),
    codePointAt: method(String.prototype, 'codePointAt'),
    stringRepeat: method(String.prototype, 'repeat'),
    padStart: method(String.prototype, 'padStart'),
    padEnd: method(String.prototype, 'padEnd'),
    startsWith: method(String.prototype, 'startsWith'),
    endsWith: method(String.prototype, 'endsWith'),
    toLowerCase: method(String.prototype, 'toLowerCase'),
    normalize: method(String.prototype, 'normalize'),
    replaceAll: method(String.prototype, 'replaceAll') as unknown as (
      s: string,
      search: string,
      replacement: string,
    ) => string,
    regexpExec,
    regexpReplace: method(RegExp.prototype, Symbol.replace) as (
      re: RegExp,
      s: string,
      replacement: string | ((match: string) => string),
    ) => string,
    regexpSplit: method(RegExp.prototype as { [Symbol.split](s: string): string[] }, Symbol.split),
    regexpToString: method(RegExp.prototype as { toString(): string }, 'toString') as (re: RegExp) => string,
    objectToString,
    hasOwn: method(Object.prototype, 'hasOwnProperty') as (o: unknown, key: PropertyKey) => boolean,
    propertyIsEnumerable: method(Object.prototype, 'propertyIsEnumerable') as (o: unknown, key: PropertyKey) => boolean,
    functionToString: method(Function.prototype, 'toString') as (fn: unknown) => string,
    hasInstance: hasInstance as (constructor: unknown, value: unknown) => boolean,
    setSize,
    setValues: method(Set.prototype, 'values') as (set: unknown) => Iterator<unknown>,
    setIteratorNext: method(Object.getPrototypeOf(new Set().values()) as Iterator<unknown>, 'next'),
    mapSize,
    mapEntries: method(Map.prototype, 'entries') as (map: unknown) => Iterator<[unknown, unknown]>,
    mapIteratorNext: method(Object.getPrototypeOf(new Map().entries()) as Iterator<[unknown, unknown]>, 'next'),
    mapGet: method(Map.prototype, 'get') as <K, V>(map: Map<K, V>, key: K) => V | undefined,
    mapSet: method(Map.prototype, 'set') as <K, V>(map: Map<K, V>, key: K, value: V) => unknown,
    setHas: method(Set.prototype, 'has') as <V>(set: Set<V>, value: V) => boolean,
    newMap: <K, V>() => new MapCtor<K, V>(),
    dateGetTime: dateGetTime as (date: unknown) => number,
    dateToISOString: method(Date.prototype, 'toISOString') as (date: unknown) => string,
    dateToString: method(Date.prototype, 'toString') as (date: unknown) => string,
    errorToString: method(Error.prototype as { toString(): string }, 'toString') as (error: unknown) => string,
    numberValueOf: numberValueOf as (value: unknown) => number,
    stringValueOf: stringValueOf as (value: unknown) => string,
    booleanValueOf: booleanValueOf as (value: unknown) => boolean,
    bigintValueOf: bigintValueOf as (value: unknown) => bigint,
    symbolValueOf: symbolValueOf as (value: unknown) => symbol,
    symbolToString: method(Symbol.prototype, 'toString') as (value: unknown) => string,
    typedArrayLength: getter<number>(TypedArrayPrototype, 'length'),
    typedArrayTag,
    newUint8Array: (buffer: ArrayBufferLike) => new Uint8Array(buffer),
    newRegExp: (source: RegExp) => new RegExp(source),
    symbolIterator: Symbol.iterator,
    symbolToStringTag: Symbol.toStringTag,
    symbolToPrimitive: Symbol.toPrimitive,
    AsyncFunctionPrototype: Object.getPrototypeOf(async function () {}) as object,
    GeneratorFunctionPrototype: Object.getPrototypeOf(function* () {}) as object,
    AsyncGeneratorFunctionPrototype: Object.getPrototypeOf(async function* () {}) as object,
    RegExpPrototype: RegExp.prototype as object,
    builtInObjects,
    wellKnownPrototypes,

    isSet: brand(setSize),
    isMap: brand(mapSize),
    isDate: brand(dateGetTime as (date: unknown) => number),
    isRegExp: (value: object) => value !== RegExp.prototype && brand(regexpSource)(value),
    isTypedArray: (value: object) => typedArrayTag(value) !== undefined,
    isArrayBuffer: brand(arrayBufferByteLength),
    isSharedArrayBuffer: (value: object) =>
      sharedArrayBufferByteLength !== undefined && brand(sharedArrayBufferByteLength)(value),
    isDataView: brand(getter<number>(DataView.prototype, 'byteLength')),
    isWeakMap: brand((value) => weakMapHas(value as WeakMap<object, unknown>, {})),
    isWeakSet: brand((value) => weakSetHas(value as WeakSet<object>, {})),
    isNumberObject: brand(numberValueOf as (value: unknown) => number),
    isStringObject: brand(stringValueOf as (value: unknown) => string),
    isBooleanObject: brand(booleanValueOf as (value: unknown) => boolean),
    isBigIntObject: brand(bigintValueOf as (value: unknown) => bigint),
    isSymbolObject: brand(symbolValueOf as (value: unknown) => symbol),
    // No brand check reads a promise without side effects: its tag will do.
    isPromise: (value: object) => objectToString(value) === '[object Promise]',
    isArgumentsObject: (value: object) => objectToString(value) === '[object Arguments]',
    isStackOverflowError: (error: unknown) =>
      error instanceof RangeErrorCtor && error.message === 'Maximum call stack size exceeded',
    isTypeError: (error: unknown): error is TypeError => error instanceof TypeErrorCtor,
    isError: (value: object) =>
      objectToString(value) === '[object Error]' ||
      (hasInstance as (c: unknown, v: unknown) => boolean)(ErrorCtor, value),
  };
}

export type Builtins = ReturnType<typeof captureBuiltins>;
