/**
 * encodeOrdinary (src/vocab/ordinary.ts, plain JS: the ported pre-tokenizer
 * and the heap BPE) against tiktoken's own WASM `encode_ordinary`: the same
 * ids for every input. Timing lives in bench/bpe/main.ts.
 *
 * FC_SEED=<n> replays a run, FC_SCALE=<k> runs k times as many cases.
 */
import fc from "fast-check";
import { createRequire } from "node:module";
import { Tiktoken } from "tiktoken/lite";
import { beforeAll, describe, expect, it } from "vitest";
import { ByteRanks, bytePairEncode } from "../../src/vocab/bpe.js";
import { loadHarmonyEncoding, type HarmonyEncoding } from "../../src/vocab/index.js";
import {
  computeV8Differences,
  isWhiteSpace,
  O200K_PATTERN_SOURCE,
  splitPieces,
  V8_DIFFERENCES,
  V8_DIFFERENCES_UNICODE,
  wellFormed,
} from "../../src/vocab/pretokenize.js";
import { LETTER, LOWERISH, NUMBER, UPPERISH } from "../../src/vocab/unicode16.js";
import { fcParams as params } from "../helpers.js";

const require = createRequire(import.meta.url);
const o200k = require("tiktoken/encoders/o200k_base.json") as { bpe_ranks: string; pat_str: string };

let enc: HarmonyEncoding;
/** tiktoken as is: the reference. */
let ref: Tiktoken;
const reference = (text: string): number[] => Array.from(ref.encode_ordinary(text));

beforeAll(() => {
  enc = loadHarmonyEncoding();
  ref = new Tiktoken(o200k.bpe_ranks, {}, o200k.pat_str);
});

// ---------------------------------------------------------------- generators

/** Whitespace where Rust's `\s` and JS's `\s` disagree, and their neighbours. */
const ODD_SPACE = [
  "\u00a0",
  "\u2028",
  "\u2029",
  "\u3000",
  "\ufeff",
  "\u0085",
  "\u180e",
  "\u200b",
  "\u1680",
  "\u202f",
  "\u205f",
  "\v",
  "\f",
];
/** Letters and digits new in Unicode 17 (V8 knows them; tiktoken's Unicode 16 tables do not). */
const UNICODE_17 = ["\u{10940}", "\u{11de0}", "\u{16ff4}", "\u{323b0}", "\u{1e6c0}", "\u088f", "\ua7ce", "\u{16ea0}", "\u{11b60}"];
const FRAGMENTS = [
  ..."abcXYZéßİıſ",
  "the",
  " The",
  "HELLO",
  "WoRd",
  ..."0123456789",
  "٣",
  "½",
  "Ⅻ",
  ..."!?.,;:/\\\"'()[]{}<>@#$%^&*-_=+`~|",
  "'s",
  "'S",
  "'t",
  "'re",
  "'Re",
  "'RE",
  "'ve",
  "'VE",
  "'m",
  "'M",
  "'ll",
  "'LL",
  "'lL",
  "'d",
  "'D",
  "'ſ",
  " ",
  "  ",
  "\t",
  "\n",
  "\r\n",
  "\r",
  "\n\n",
  ...ODD_SPACE,
  "中",
  "文字",
  "，",
  "。",
  "日本語",
  "한국어",
  "ひらがな",
  "カタカナ",
  "😀",
  "👍🏽",
  "👨‍👩‍👧",
  "\u0301",
  "e\u0301",
  "\u0915\u094d",
  "ǅ",
  "ʰ",
  "\ud800",
  "\udc00",
  "\u0000",
  "\u007f",
  "\ufffd",
  ...UNICODE_17,
];
const fragment = fc.constantFrom(...FRAGMENTS);
/** One fragment repeated: long runs of letters, digits, spaces, punctuation, CJK, marks… */
const run = (min: number, max: number) => fc.tuple(fragment, fc.integer({ min, max })).map(([f, n]) => f.repeat(Math.ceil(n / f.length)));
const mixed = (min: number, max: number) =>
  fc.array(fc.oneof({ weight: 6, arbitrary: fragment }, { weight: 1, arbitrary: run(min, max) }), { maxLength: 40 }).map((a) => a.join(""));

// ---------------------------------------------------------------- properties

describe("encodeOrdinary equals tiktoken's encode_ordinary", () => {
  it("on random mixes of short pieces and long runs", () => {
    fc.assert(
      fc.property(mixed(100, 1500), (text) => {
        expect(enc.encodeOrdinary(text)).toEqual(reference(text));
      }),
      params(150),
    );
  });

  it("on random mixes of short pieces and short runs", () => {
    fc.assert(
      fc.property(mixed(4, 120), (text) => {
        expect(enc.encodeOrdinary(text)).toEqual(reference(text));
      }),
      params(400),
    );
  });

  it("on arbitrary strings, full Unicode range", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 200 }), fc.string({ unit: "grapheme", maxLength: 60 }), (a, b) => {
        const text = a + b + a;
        expect(enc.encodeOrdinary(text)).toEqual(reference(text));
      }),
      params(300),
    );
  });

  it("on texts far longer than its scratch buffer, and after them on short ones again", () => {
    for (const text of ["Hello, world! ".repeat(40_000), "日本語のテキスト。".repeat(50_000), "ok"]) {
      expect(enc.encodeOrdinary(text)).toEqual(reference(text));
    }
  });

  it("every heap merge equals tiktoken on the piece alone", () => {
    const ranks = new ByteRanks(enc.table, 199998);
    const te = new TextEncoder();
    fc.assert(
      fc.property(mixed(2, 300), (text) => {
        for (const piece of splitPieces(wellFormed(text))) {
          const out: number[] = [];
          bytePairEncode(te.encode(piece), ranks, out);
          expect(out).toEqual(reference(piece));
        }
      }),
      params(150),
    );
  });
});

describe("the pre-tokenizer port", () => {
  it("pieces tile the text, and encoding whole pieces separately equals encoding their concatenation", () => {
    fc.assert(
      fc.property(mixed(1, 80), fc.nat(), (raw, k) => {
        const text = wellFormed(raw);
        const pieces = splitPieces(text);
        expect(pieces.join("")).toBe(text);
        if (pieces.length === 0) return;
        const cut = pieces.slice(0, k % (pieces.length + 1)).join("").length;
        // `\s+(?!\S)` looks past the cut: from whitespace to a non-space, a "0" stands in for it (its id dropped)
        const head =
          cut > 0 && isWhiteSpace(text.charCodeAt(cut - 1)) && cut < text.length && !isWhiteSpace(text.charCodeAt(cut))
            ? reference(text.slice(0, cut) + "0").slice(0, -1)
            : reference(text.slice(0, cut));
        expect([...head, ...reference(text.slice(cut))]).toEqual(reference(text));
      }),
      params(300),
    );
  });

  it("cutting inside a piece would change the ids, and so would a plain cut after whitespace before a non-space", () => {
    const text = "hello";
    expect([...reference("hel"), ...reference("lo")]).not.toEqual(reference(text));
    const spaced = "\u3000\u3000" + ":".repeat(40);
    expect(splitPieces(spaced).slice(0, 2)).toEqual(["\u3000", "\u3000"]);
    expect([...reference("\u3000\u3000"), ...reference(":".repeat(40))]).not.toEqual(reference(spaced));
    expect([...reference("\u3000\u30000").slice(0, -1), ...reference(":".repeat(40))]).toEqual(reference(spaced));
    expect(enc.encodeOrdinary(spaced)).toEqual(reference(spaced));
  });

  it("V8_DIFFERENCES lists every code point Node's ICU classes unlike Unicode 16", () => {
    if (process.versions.unicode !== V8_DIFFERENCES_UNICODE) return; // forV8 measures at run time then
    expect(computeV8Differences()).toBe(V8_DIFFERENCES);
  });

  it("splits as the pattern spelled with Unicode 16 ranges (slow, exact) does", () => {
    const cls = (ranges: string) =>
      ranges
        .split(",")
        .map((r) =>
          r
            .split("-")
            .map((h) => `\\u{${h}}`)
            .join("-"),
        )
        .join("");
    const [L, N, UP, LOW] = [LETTER, NUMBER, UPPERISH, LOWERISH].map(cls);
    const src = O200K_PATTERN_SOURCE.replaceAll("\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}", UP!)
      .replaceAll("\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}", LOW!)
      .replaceAll("\\p{N}{1,3}", `[${N!}]{1,3}`)
      .replaceAll("\\p{L}", L!)
      .replaceAll("\\p{N}", N!);
    expect(src).not.toContain("\\p{");
    const exact = new RegExp(src, "gu");
    const split = (text: string) => text.match(exact) ?? [];
    const changed = V8_DIFFERENCES.split(",").map((r) => String.fromCodePoint(parseInt(r, 16)));
    const odd = fc.constantFrom(...changed, ...FRAGMENTS);
    fc.assert(
      fc.property(fc.array(fc.oneof(odd, fc.string({ unit: "binary", maxLength: 8 })), { maxLength: 30 }), (parts) => {
        const text = wellFormed(parts.join(""));
        expect(splitPieces(text)).toEqual(split(text));
      }),
      params(500),
    );
  });

  it("splits Unicode whitespace, contractions and Unicode 17 characters as tiktoken does", () => {
    const contexts = (c: string) => [
      c + "'s",
      "1" + c + "11",
      "a" + c + "'S",
      "A" + c + "a",
      "a" + c + "A",
      c + "!",
      "x" + c + "1",
      " " + c + c + " ",
      "  " + c,
    ];
    const te = new TextEncoder();
    const ranks = new ByteRanks(enc.table, 199998);
    for (const c of [...ODD_SPACE, ...UNICODE_17, "ſ", "K", "ǅ", "\u0301"]) {
      for (const s of contexts(c)) {
        const out: number[] = [];
        for (const piece of splitPieces(s)) bytePairEncode(te.encode(piece), ranks, out);
        expect(out, JSON.stringify(s)).toEqual(reference(s));
        expect(enc.encodeOrdinary(s.repeat(20)), JSON.stringify(s)).toEqual(reference(s.repeat(20)));
      }
    }
    expect(splitPieces("don'ſ DON'S")).toEqual(["don'ſ", " DON'S"]);
    expect(splitPieces("a\ufeff\ufeffb")).toEqual(["a", "\ufeff\ufeff", "b"]);
    expect(splitPieces("a\u0085\u0085b")).toEqual(["a", "\u0085", "\u0085b"]);
  });
});

// ---------------------------------------------------------------- fixed cases

describe("long words", () => {
  it("a 20,000-character word: the same ids as tiktoken", () => {
    for (const word of ["ab".repeat(10_000), "x".repeat(20_000), "Zebra".repeat(4_000), " " + "é".repeat(10_000), "中".repeat(7_000)]) {
      expect(enc.encodeOrdinary(word)).toEqual(reference(word));
    }
  });

  it("a 120,000-character word and a long-word request decode back to their text", () => {
    const decode = (ids: number[]) => {
      const { offsets, bytes } = enc.table;
      return Buffer.concat(ids.map((id) => bytes.subarray(offsets[id]!, offsets[id + 1]!))).toString("utf8");
    };
    const word = "abcdefghij".repeat(12_000);
    expect(decode(enc.encodeOrdinary(word))).toBe(word);
    const request = Array.from({ length: 8 }, (_, i) => "Hello there, " + String.fromCharCode(97 + i).repeat(30_000) + "!\n").join("");
    expect(decode(enc.encodeOrdinary(request))).toBe(request);
  });
});

describe('encode (specials written out) equals tiktoken\'s encode(text, "all")', () => {
  it("on random mixes of text, specials, special-looking text and long runs", async () => {
    const { HARMONY, specialText } = await import("../../src/core/preset.js");
    const specials: Record<string, number> = {};
    for (let id = HARMONY.firstSpecial; id < HARMONY.vocabLimit; id++) specials[specialText(HARMONY, id)!] = id;
    const withSpecials = new Tiktoken(o200k.bpe_ranks, specials, o200k.pat_str);
    const part = fc.oneof(
      { weight: 4, arbitrary: mixed(10, 400) },
      { weight: 2, arbitrary: fc.constantFrom("<|start|>", "<|end|>", "<|channel|>", "<|message|>", "<|call|>", "<|reserved_200100|>") },
      { weight: 1, arbitrary: fc.constantFrom("<|", "|>", "<|nope|>", "<|<|end|>", "<|end|", "<||>", "<|start|><|end|>") },
    );
    fc.assert(
      fc.property(fc.array(part, { maxLength: 12 }), (parts) => {
        const text = parts.join("");
        expect(enc.encode(text)).toEqual(Array.from(withSpecials.encode(text, "all")));
      }),
      params(200),
    );
    withSpecials.free();
  });
});
