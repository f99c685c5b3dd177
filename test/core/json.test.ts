/** isJson agrees with JSON.parse on every text: JSON values, their mutations, and arbitrary strings. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isJson, isJsonBytes, jsonTooDeep } from "../../src/core/json.js";
import { fcParams, parsesAsJson } from "../helpers.js";

describe("isJson", () => {
  it("agrees with JSON.parse on fixed cases", () => {
    for (const t of [
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
    ]) {
      expect(isJson(t), JSON.stringify(t)).toBe(parsesAsJson(t));
    }
    expect(isJson("[".repeat(200) + "]".repeat(200))).toBe(true);
  });

  it("agrees with JSON.parse on JSON, mutated JSON and any string", () => {
    const mutated = fc
      .tuple(fc.json(), fc.nat(), fc.constantFrom("", ",", "]", "}", "{", "[", '"', ":", " ", "1", "e", "-", "\\"))
      .map(([j, at, c]) => {
        const k = at % (j.length + 1);
        return j.slice(0, k) + c + j.slice(k + (at % 2));
      });
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
});
