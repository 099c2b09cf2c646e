import { format } from 'node:util';
import { runInThisContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { createIsolateSandbox } from '../../src/tools/code-execution/javascript-isolate.ts';

// A probe of the tool: console.log(0/0, 1/0, [undefined], new Error("boom"), new Map([[1, 2]]))
// printed `null null [null] {} {}` (JSON.stringify), -0 printed 0 and a circular object
// `[object Object]`. console.log in the isolate now prints what Node's prints: util.format.

const sandbox = createIsolateSandbox({ memoryMb: 128, outputLimitBytes: 64 * 1024 });
const run = (code: string, options: { timeoutMs?: number } = {}) =>
  sandbox.run({ code, timeoutMs: options.timeoutMs ?? 5_000, slot: 0, signal: new AbortController().signal });

/** What Node's console.log prints for the same arguments, evaluated here on the host. */
const nodePrints = (args: string) => `${format(...(runInThisContext(`[${args}]`) as unknown[]))}\n`;

/** An error whose stack is the same on the host and in the isolate (frames name their files). */
const error = (type: string, message: string, frames = '\\n    at f (main.js:1:2)\\n    at main.js:3:4') =>
  `(() => { const e = new ${type}(${JSON.stringify(message)}); e.stack = "${type}: ${message}${frames}"; return e })()`;

const cases: Record<string, string[]> = {
  numbers: ['0/0, 1/0, -1/0, Math.sqrt(-1), -0, 0, 1.5, 1e21, 0.1 + 0.2', '[-0, NaN, Infinity], { z: -0 }'],
  primitives: [
    '1n, -5n, 2n ** 70n',
    'undefined, null, true, false',
    'Symbol("a"), Symbol(), Symbol.iterator',
    '"top level as is", "with\\nnewline"',
  ],
  'strings in containers': [
    '["a", "it\'s", "say \\"hi\\"", "both \' and \\"", "tab\\there", "\\u0001", "\\x7f"]',
    '["lone \\ud800 surrogate", "pair \\ud83d\\ude00", "back`tick \' \\""]',
    '{ text: "a".repeat(100) }, ["b".repeat(90)], { long: "y".repeat(10050) }',
    '{ multi: "line one\\nline two\\nline three and a much longer third line to pass eighty columns" }',
  ],
  arrays: [
    '[undefined], [null], [1, , 3], [ , , ], new Array(5), [1, 2, 3], []',
    '(() => { const a = [1, 2]; a[10] = 3; a.extra = "x"; return a })()',
    '"abc".match(/b/)',
    'Array.from({ length: 30 }, (_, i) => i)',
    'Array.from({ length: 120 }, (_, i) => i * 3)',
    'Array.from({ length: 26 }, (_, i) => String.fromCharCode(97 + i).repeat(i % 5 + 1))',
    'Array.from({ length: 10 }, (_, i) => ({ i }))',
    '(() => { const a = new Array(200); a[0] = 1; a[150] = 2; return a })()',
  ],
  objects: [
    '{}, { a: 1 }, { a: 1, b: "two", c: [3], d: { e: null } }',
    '{ "key with space": 1, valid_id: 2, 3: "num", "-1": 4, [Symbol("s")]: 5, "__proto__": 6 }',
    'Object.fromEntries(Array.from({ length: 30 }, (_, i) => ["key" + i, i]))',
    '{ get g() { return 1 }, set s(v) {}, get gs() { return 1 }, set gs(v) {} }',
    'Object.defineProperty({ visible: 1 }, "hidden", { value: 2, enumerable: false })',
    'Object.create(null), Object.assign(Object.create(null), { a: 1 })',
    '(function () { return arguments })(1, 2)',
  ],
  'depth limit': [
    '{ a: { b: { c: { d: { e: 1 } } } } }, [[[[[1]]]]]',
    '[[1, 2, [3, 4, [5, [6]]]], { x: { y: { z: { w: 1 } } } }]',
    '(() => { let o = {}; for (let i = 0; i < 100000; i++) o = { o }; return o })()',
  ],
  circular: [
    '(() => { const o = { name: "o" }; o.self = o; o.list = [o, { back: o }]; return o })()',
    '(() => { const a = { x: 1 }; const b = { a }; a.b = b; return [a, b] })()',
    '(() => { const m = new Map(); m.set("me", m); return m })()',
  ],
  functions: [
    'function foo() {}, () => 1, function () {}, async function af() {}, function* gen() {}, async function* ag() {}',
    'class A {}, class B extends Array {}, (class {})',
    '{ fn: Object.assign(function withProps() {}, { a: 1 }) }, Math.max',
  ],
  'class instances': [
    '(() => { class Point { constructor() { this.x = 1; this.y = 2 } } return new Point() })()',
    '(() => { class Empty {} return new Empty() })()',
    '(() => { class T { get [Symbol.toStringTag]() { return "Tagged" } } return new T() })()',
    'Object.assign(Object.create({ inherited: 1 }), { own: 2 })',
  ],
  errors: [
    error('Error', 'boom'),
    `Object.assign(${error('TypeError', 'bad')}, { code: "E_BAD" })`,
    '(() => { const e = new Error("no frames"); e.stack = "Error: no frames"; return e })()',
    `{ nested: { err: ${error('RangeError', 'deep')} } }, [${error('Error', 'in array')}]`,
    '(() => { class MyError extends Error {} const e = new MyError("m"); e.stack = "Error: m\\n    at main.js:1:1"; return e })()',
    `(() => { const e = ${error('Error', 'wrapped')}; e.cause = ${error('Error', 'why')}; return e })()`,
  ],
  'Map and Set': [
    'new Map([[1, 2]]), new Map(), new Map([["k", { v: [1] }], [{ o: 1 }, "x"]])',
    'new Set([1, "a", [2]]), new Set(), new WeakMap(), new WeakSet()',
    'new Set(Array.from({ length: 150 }, (_, i) => i))',
    'new Map(Array.from({ length: 8 }, (_, i) => [i, "v" + i]))',
  ],
  'other built-ins': [
    'new Date(0), new Date(1700000000000), new Date(NaN)',
    '/ab+c/gi, new RegExp("a/b"), Object.assign(/r/g, { extra: 1 })',
    'new Uint8Array([1, 2, 3]), new Float64Array(2), new Int16Array(0), new BigInt64Array([1n, -2n])',
    'new Uint8Array(150), new ArrayBuffer(4), new DataView(new ArrayBuffer(2))',
    'new Number(3), new String("ab"), new Boolean(false), Object(1n), Object(Symbol("q"))',
    'JSON, new Proxy({ a: 1 }, {})',
  ],
  'printf-style': [
    '"%s is %d years and %i, %f", "Bob", 42.5, 42.9, "3.5abc"',
    '"%j %j", { a: [1] }, (() => { const c = {}; c.c = c; return c })()',
    '"%o", { a: [1, 2], f() {} }',
    '"%o", function f(a, b) {}',
    '"%O and %O", { a: { b: { c: { d: 1 } } } }, [1]',
    '"100%% sure %s", "yes", "extra", 3',
    '"%s %s", { a: 1 }, [1, [2, [3]]]',
    '"%s", (() => { class P { toString() { return "custom" } } return new P() })()',
    '"%s %s %s %s", 1n, -0, Symbol("s"), null',
    '"%d %d %i %f", "abc", 10n, "12.7px", Symbol("x")',
    '"%c styled", "color: red"',
    '"missing %s %d"',
    '"%x unknown", 1',
    '5, "%s", 6',
    '',
  ],
};

describe('JavaScript console prints what Node prints', () => {
  for (const [group, list] of Object.entries(cases)) {
    it.each(list)(`${group}: console.log(%s)`, async (args) => {
      const result = await run(`console.log(${args})`);
      expect(result.exit_code).toBe(0);
      expect(result.output).toBe(nodePrints(args));
    });
  }

  it('an error keeps the stack the isolate gave it', async () => {
    const result = await run('console.log(new Error("boom"))');
    expect(result.output).toBe('Error: boom\n    at main.js:1:13\n');
  });

  it('info, warn, error and debug print as log does', async () => {
    const result = await run('for (const k of ["info", "warn", "error", "debug"]) console[k](k, { n: -0 })');
    expect(result.output).toBe('info { n: -0 }\nwarn { n: -0 }\nerror { n: -0 }\ndebug { n: -0 }\n');
  });

  it("a promise's state is not shown: the isolate cannot read it without waiting", async () => {
    expect((await run('console.log(Promise.resolve(1))')).output).toBe('Promise { <state unknown> }\n');
  });

  it('prints with the built-ins as they were before the program changed them', async () => {
    const args = '{ a: [1, 2] }, new Map([[1, "x"]]), "%s", -0';
    const result = await run(
      [
        'Object.keys = () => { throw new Error("keys") };',
        'Array.prototype.join = null; Array.prototype.push = null; String.prototype.slice = null;',
        'JSON.stringify = null; Map.prototype.get = null; Object.prototype.hasOwnProperty = null;',
        `console.log(${args})`,
      ].join('\n'),
    );
    expect(result.output).toBe(nodePrints(args));
  });
});

describe('JavaScript console formatting is bounded', () => {
  it('a 5 million element array with a hole prints its first 100 entries at once', async () => {
    // Node lists an array's own keys to find holes; Object.keys here would have made 5 million
    // strings, more than the isolate's 128 MB.
    const result = await run('const a = new Array(5e6).fill(1); delete a[3]; a.extra = 1; console.log(a)');
    expect(result.exit_code).toBe(0);
    expect(result.output).toContain('<1 empty item>');
    expect(result.output).toContain('... 4999900 more items');
  });

  it('an object of 200,000 keys stops being formatted at the output cap', async () => {
    const small = createIsolateSandbox({ memoryMb: 128, outputLimitBytes: 16 * 1024 });
    const result = await small.run({
      code: 'const o = {}; for (let i = 0; i < 2e5; i++) o["k" + i] = "v".repeat(20); console.log("done"); console.log(o)',
      timeoutMs: 10_000,
      slot: 0,
      signal: new AbortController().signal,
    });
    expect(result.truncated).toBe(true);
    expect(result.timed_out).toBe(false);
    expect(Buffer.byteLength(result.output)).toBe(16 * 1024);
    expect(result.output).toMatch(/^done\n\{\n {2}k0: 'v{20}',\n {2}k1: /);
  });

  it('100 × 100 × 100 nested arrays, also through %o (depth 4), stop at the cap', async () => {
    const result = await run(
      'const l = Array.from({ length: 100 }, () => Array.from({ length: 100 }, () => Array.from({ length: 100 }, (_, i) => i))); console.log("%o", l)',
    );
    expect(result.truncated).toBe(true);
    expect(Buffer.byteLength(result.output)).toBe(64 * 1024);
  });
});
