/** isJson and isJsonTokens agree with JSON.parse on every text: JSON values, their mutations, and arbitrary strings. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isJson, isJsonBytes, isJsonTokens, jsonTooDeep, jsonTooDeepLong } from "../../src/core/json.js";
import { FLAG_JSON_PLAIN, FLAG_SPECIAL, FLAG_WHOLE } from "../../src/core/vocab.js";
import { fcParams, harmony, mutatedJson, parsesAsJson } from "../helpers.js";

/** Texts at JSON's edges: numbers, escapes, literals, empty containers, separators, whitespace. */
const FIXED = [
  "",
  " ",
  "{}",
  "[]",
  "{ }",
  "[ ]",
  "0",
  "-0",
  "01",
  "1.",
  ".5",
  "1e5",
  "1E+5",
  "1e",
  "-",
  "- 1",
  "true",
  "tru",
  "nulll",
  '"a"',
  '"\\u12"',
  '"\\u12ab"',
  '"\\x"',
  '"\t"',
  '"a\\/b"',
  '{"a":1}',
  '{"a" : 1 , "b":[1,2,{}]}',
  '{"a":1,}',
  "[1,]",
  "[,1]",
  '{"a"}',
  "{1:2}",
  "[1 2]",
  '{"a":1}}',
  '{"a":1} x',
  " \n[\r\t]\n ",
  "[[[[]]]]",
  "[[[[]]]",
  '"\\ud800"',
  '"\ud800"',
  '"\u0000"',
  "[]\u0000",
  "\u00a0[]",
  "[1]\u2028",
  '{"a":[true,false,null]}',
];

describe("isJson", () => {
  it("agrees with JSON.parse on fixed cases", () => {
    for (const t of FIXED) {
      expect(isJson(t), JSON.stringify(t)).toBe(parsesAsJson(t));
    }
    expect(isJson("[".repeat(200) + "]".repeat(200))).toBe(true);
  });

  it("agrees with JSON.parse on JSON, mutated JSON and any string", () => {
    const mutated = mutatedJson(["", ",", "]", "}", "{", "[", '"', ":", " ", "1", "e", "-", "\\"]);
    fc.assert(
      fc.property(
        fc.oneof(
          fc.json(),
          fc.jsonValue().map((v) => JSON.stringify(v, null, 2)),
          mutated,
          fc.string(),
          fc.string({ unit: "binary" }),
        ),
        (t) => {
          expect(isJson(t)).toBe(parsesAsJson(t));
        },
      ),
      fcParams(5000),
    );
  });

  it("isJsonBytes reads only the n bytes it is given (whatever follows them), as JSON.parse reads their text", () => {
    // the parser hands it a reused buffer: what lies past n is an earlier call's bytes
    fc.assert(
      fc.property(fc.oneof(fc.json(), fc.string(), fc.string({ unit: "binary" })), fc.json(), (t, junk) => {
        const bytes = new TextEncoder().encode(t);
        const buf = new Uint8Array(bytes.length + junk.length * 3 + 1);
        const tail = new TextEncoder().encodeInto(junk, buf.subarray(bytes.length)).written;
        buf.set(bytes);
        expect(isJsonBytes(buf, bytes.length), JSON.stringify([t, junk, tail])).toBe(parsesAsJson(new TextDecoder().decode(bytes)));
      }),
      fcParams(3000),
    );
  });
});

describe("isJsonTokens", () => {
  const { enc, vocab } = harmony();
  const whole = (ids: number[]) => ids.every((id) => (vocab.flags[id]! & (FLAG_WHOLE | FLAG_SPECIAL)) === FLAG_WHOLE);
  const textOf = (ids: number[]) => ids.map((id) => vocab.text(id)).join("");
  /** Tokens of `pieces`, each encoded alone: the same text with its token boundaries wherever the pieces end. */
  const tokensOf = (pieces: string[]) => pieces.flatMap((p) => (p === "" ? [] : enc.encodeOrdinary(p)));
  const texts = fc.oneof(
    fc.json(),
    fc.jsonValue().map((v) => JSON.stringify(v, null, 2)),
    mutatedJson(["", ",", "]", "}", "{", "[", '"', ":", " ", "1", "e", "-", "\\", "\\u", "\n", "tru"]),
    fc.string(),
  );

  it("flags exactly the ordinary tokens with no quote, backslash or control character as plain", () => {
    let plain = 0;
    for (let id = 0; id < vocab.size; id++) {
      const f = vocab.flags[id]!;
      const bytes = vocab.bytes.subarray(vocab.byteStart(id), vocab.byteEnd(id));
      const expected = (f & FLAG_SPECIAL) === 0 && bytes.every((b) => b >= 0x20 && b !== 0x22 && b !== 0x5c);
      if (((f & FLAG_JSON_PLAIN) !== 0) !== expected) expect.fail(`token ${id}: ${JSON.stringify(vocab.text(id))}`);
      if (expected) plain++;
    }
    // most of the vocabulary is words and word pieces
    expect(plain).toBeGreaterThan(190_000);
  });

  it("agrees with JSON.parse on the text of the tokens, however the text is cut into tokens", () => {
    fc.assert(
      fc.property(texts, fc.array(fc.nat(), { maxLength: 12 }), (t, cuts) => {
        // the text as the tokenizer cuts it, and cut again at random places (every state meets a boundary)
        const at = [...new Set(cuts.map((c) => c % (t.length + 1)))].sort((a, b) => a - b);
        const pieces = [...at, t.length].map((end, k) => t.slice(k === 0 ? 0 : at[k - 1], end));
        for (const ids of [enc.encodeOrdinary(t), tokensOf(pieces), tokensOf([...t])]) {
          fc.pre(whole(ids));
          expect(textOf(ids)).toBe(t);
          expect(isJsonTokens(vocab, ids, 0, ids.length), JSON.stringify(t)).toBe(parsesAsJson(t));
        }
      }),
      fcParams(3000),
    );
  });

  it("agrees with JSON.parse on fixed cases, one token a character and as the tokenizer cuts them", () => {
    for (const t of [
      ...FIXED,
      '{"a":01}',
      "[1.5e+3,-0.0e-0,0e1,-01]",
      '{"k\\"":"v\\\\"}',
      '["\\u00e9\\ud83d\\ude00"]',
      "[truefalse]",
      "[nul]",
      "1,2",
      "[1],[2]",
      "{}]",
      '"\\u123"',
      '["\\u123g"]',
      "1.5.3",
      "[1.2.3]",
      "[0.1e5,1.0E-2]",
      "[".repeat(200) + "]".repeat(200),
      '{"a":'.repeat(100) + "1" + "}".repeat(99),
      '{"a":'.repeat(100) + "1" + "}".repeat(100),
    ]) {
      for (const ids of [enc.encodeOrdinary(t), tokensOf([...t])]) {
        if (!whole(ids)) continue;
        expect(isJsonTokens(vocab, ids, 0, ids.length), JSON.stringify(t)).toBe(parsesAsJson(t));
      }
    }
  });

  it("reads only ids[from, to), from a typed array or a plain one", () => {
    const ids = enc.encodeOrdinary('x{"a": [1, 2.5e-3, true, null, "\\u00e9"]}x');
    const inner = Uint32Array.from(ids);
    expect(isJsonTokens(vocab, ids, 0, ids.length)).toBe(false);
    expect(isJsonTokens(vocab, ids, 1, ids.length - 1)).toBe(true);
    expect(isJsonTokens(vocab, inner, 1, ids.length - 1)).toBe(true);
    expect(isJsonTokens(vocab, inner, 1, ids.length - 2)).toBe(false);
    expect(isJsonTokens(vocab, inner, 1, 1)).toBe(false);
  });
});

describe("jsonTooDeep", () => {
  /** The nesting of a parsed value, by an explicit stack (the values here are small and trusted). */
  const depthOf = (v: unknown): number => {
    let max = 0;
    const stack: [unknown, number][] = [[v, 0]];
    while (stack.length > 0) {
      const [x, d] = stack.pop()!;
      if (typeof x !== "object" || x === null) continue;
      max = Math.max(max, d + 1);
      for (const child of Object.values(x)) stack.push([child, d + 1]);
    }
    return max;
  };

  it("agrees with the parsed value's depth, whatever the strings hold (quotes, backslashes, brackets)", () => {
    const tricky = fc.constantFrom('"', "\\", "\\\\", '\\"', "[", "]", "{", "}", "a", "é", "\u0000");
    const str = fc.array(tricky, { maxLength: 8 }).map((a) => a.join(""));
    const value = fc.letrec((tie) => ({
      v: fc.oneof(
        { depthSize: "small" },
        str,
        fc.integer(),
        fc.array(tie("v"), { maxLength: 3 }),
        fc.dictionary(str, tie("v"), { maxKeys: 3 }),
      ),
    })).v;
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 6 }), (v, max) => {
        const text = JSON.stringify(v);
        expect(jsonTooDeep(text, max)).toBe(depthOf(v) > max);
      }),
      fcParams(1000),
    );
  });

  it("skips a long string, and one whose quotes are escaped, without miscounting", () => {
    expect(jsonTooDeep(`{"a":"${"x".repeat(4_000_000)}"}`, 1)).toBe(false);
    expect(jsonTooDeep(JSON.stringify({ a: '\\"[[[[' + "\\".repeat(7) + '"' }), 1)).toBe(false);
    expect(jsonTooDeep(`[${"[".repeat(64)}${"]".repeat(64)}]`)).toBe(true);
    expect(jsonTooDeep('"unterminated [[[[')).toBe(false);
  });

  it("jsonTooDeepLong (runs skipped natively) gives jsonTooDeep's answer on every text", () => {
    const piece = fc.constantFrom('"', "\\", "\\\\", "[", "]", "{", "}", ",", "1", "23105", " ", "a", "é");
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 40 }), fc.integer({ min: 0, max: 4 }), (parts, max) => {
        const text = parts.join("");
        expect(jsonTooDeepLong(text, max)).toBe(jsonTooDeep(text, max));
      }),
      fcParams(3000),
    );
    const event = JSON.stringify({ choices: [{ index: 0, token_ids: new Array<number>(300_000).fill(23105) }] });
    expect([jsonTooDeepLong(event, 4), jsonTooDeepLong(event, 3)]).toEqual([false, true]); // { [ { [
  });
});
