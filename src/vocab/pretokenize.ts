/**
 * o200k_base's pre-tokenizer (`o200k.pat_str`) ported to a JS RegExp.
 *
 * tiktoken runs the pattern with Rust's fancy-regex/regex, whose syntax
 * differs from JS here:
 * - `\s` is Unicode White_Space in Rust. JS `\s` adds U+FEFF and lacks U+0085
 *   (NEL), so both `\s` and `\S` are spelled out as the Rust set.
 * - `(?i:'s|'t|…)` has no JS form inside a pattern: expanded by hand. Rust
 *   folds case with Unicode simple case folding, so `s` also matches U+017F
 *   (LATIN SMALL LETTER LONG S); no other letter of the group has a non-ASCII
 *   fold.
 * - `\p{L}`, `\p{Lu}`, … are General_Category sets of the regex crate's
 *   Unicode version (16.0, tables in unicode16.ts), while V8's follow Node's
 *   ICU (17.0 in Node 20.20). Spelling the sets out as ranges makes V8 run the
 *   pattern many times slower, so the pattern keeps `\p{…}` and runs on a copy of
 *   the text where each code point that V8 classes differently (Unicode 17's
 *   new letters and digits; U+0295, Ll in 16 and Lo in 17) is replaced by one
 *   of the same UTF-16 length that both class as tiktoken does (`forV8`).
 * - `(?!\S)` is a plain negative lookahead in both.
 * Every code point is matched by some alternative and no alternative matches
 * the empty string, so pieces tile the text: a search started at any piece
 * start yields the same pieces as one started at 0.
 */

import { LETTER, LOWERISH as LOWERISH_RANGES, NUMBER, UPPERISH as UPPERISH_RANGES } from "./unicode16.js";

/** Unicode White_Space, which is what Rust's `\s` means (inside a character class). */
const WS = "\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const UPPERISH = "\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}";
const LOWERISH = "\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}";
/** `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` */
const CONTRACTION = "(?:'(?:[sS\\u017f]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))?";

/** The o200k_base pattern as JS source (`u` flag). */
export const O200K_PATTERN_SOURCE = [
  `[^\\r\\n\\p{L}\\p{N}]?[${UPPERISH}]*[${LOWERISH}]+${CONTRACTION}`,
  `[^\\r\\n\\p{L}\\p{N}]?[${UPPERISH}]+[${LOWERISH}]*${CONTRACTION}`,
  `\\p{N}{1,3}`,
  ` ?[^${WS}\\p{L}\\p{N}]+[\\r\\n/]*`,
  `[${WS}]*[\\r\\n]+`,
  `[${WS}]+(?![^${WS}])`,
  `[${WS}]+`,
].join("|");

/**
 * A fresh global matcher (each caller owns its `lastIndex`). Run it on
 * `forV8(text)`. Global rather than sticky: V8 runs it faster, and as
 * every position matches, a match found from a piece start begins there.
 */
export function o200kRegExp(): RegExp {
  return new RegExp(O200K_PATTERN_SOURCE, "gu");
}

/** Split text into pieces exactly as tiktoken's pre-tokenizer does (well-formed UTF-16 expected). */
export function splitPieces(text: string): string[] {
  const re = o200kRegExp();
  const masked = forV8(text);
  const out: string[] = [];
  for (let at = 0; at < text.length;) {
    re.lastIndex = at;
    const m = re.exec(masked);
    if (!m || m.index !== at) throw new Error(`bug: o200k pattern: no piece at ${at}`);
    out.push(text.slice(at, at + m[0].length));
    at += m[0].length;
  }
  return out;
}

// ---------------------------------------------------------------- V8 vs Unicode 16

const SIG_L = 1; // \p{L}
const SIG_N = 2; // \p{N}
const SIG_UPPERISH = 4; // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
const SIG_LOWERISH = 8; // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
const V8_SETS: [number, RegExp][] = [
  [SIG_L, /\p{L}/u],
  [SIG_N, /\p{N}/u],
  [SIG_UPPERISH, new RegExp(`[${UPPERISH}]`, "u")],
  [SIG_LOWERISH, new RegExp(`[${LOWERISH}]`, "u")],
];

/** For each signature, a code point with it (in every Unicode version): [BMP, astral]. */
const STAND_IN: Record<number, [string, string]> = {
  0: ["\u0378", "\u{10ffff}"], // unassigned / noncharacter: "other"
  [SIG_N]: ["\u0661", "\u{1d7ce}"], // Nd
  [SIG_L | SIG_UPPERISH]: ["A", "\u{1d400}"], // Lu
  [SIG_L | SIG_LOWERISH]: ["a", "\u{1d41a}"], // Ll
  [SIG_L | SIG_UPPERISH | SIG_LOWERISH]: ["\u4e00", "\u{20000}"], // Lo
  [SIG_UPPERISH | SIG_LOWERISH]: ["\u0301", "\u{1d165}"], // Mn, Mc
};

/**
 * Code points whose signature in Node 20.20's ICU (Unicode 17.0) differs from
 * Unicode 16's, with their Unicode 16 signature: `hex[-hex]:signature`.
 * Computed by `computeV8Differences` (test/vocab checks it stays so).
 */
export const V8_DIFFERENCES_UNICODE = "17.0";
export const V8_DIFFERENCES =
  "295:9,88f:0,c5c:0,cdc:0,1acf-1add:0,1ae0-1aeb:0,a7ce-a7cf:0,a7d2:0,a7d4:0,a7f1:0,10940-10959:0,10ec5-10ec7:0,10efa-10efb:0," +
  "11b60-11b67:0,11db0-11ddb:0,11de0-11de9:0,16ea0-16eb8:0,16ebb-16ed3:0,16ff2-16ff6:0,187f8-187ff:0,18d09-18d1e:0,18d80-18df2:0," +
  "1e6c0-1e6de:0,1e6e0-1e6f5:0,1e6fe-1e6ff:0,2b73a-2b73f:0,2cea2-2cead:0,323b0-33479:0";

function parseRanges(s: string): [number, number][] {
  return s.split(",").map((r) => {
    const [a, b] = r.split("-");
    return [parseInt(a!, 16), parseInt(b ?? a!, 16)];
  });
}

function inRanges(rs: [number, number][], c: number): boolean {
  let lo = 0;
  let hi = rs.length - 1;
  while (lo <= hi) {
    const m = (lo + hi) >> 1;
    if (c < rs[m]![0]) hi = m - 1;
    else if (c > rs[m]![1]) lo = m + 1;
    else return true;
  }
  return false;
}

/** Every code point V8 classes differently from Unicode 16, in the V8_DIFFERENCES format (a scan of every code point: slow, done once). */
export function computeV8Differences(): string {
  const u16: [number, [number, number][]][] = [
    [SIG_L, parseRanges(LETTER)],
    [SIG_N, parseRanges(NUMBER)],
    [SIG_UPPERISH, parseRanges(UPPERISH_RANGES)],
    [SIG_LOWERISH, parseRanges(LOWERISH_RANGES)],
  ];
  const out: [number, number, number][] = [];
  for (let c = 0; c <= 0x10ffff; c++) {
    if (c === 0xd800) c = 0xe000;
    const ch = String.fromCodePoint(c);
    let want = 0;
    let v8 = 0;
    for (const [bit, rs] of u16) if (inRanges(rs, c)) want |= bit;
    for (const [bit, re] of V8_SETS) if (re.test(ch)) v8 |= bit;
    if (want === v8) continue;
    const last = out[out.length - 1];
    if (last && last[1] === c - 1 && last[2] === want) last[1] = c;
    else out.push([c, c, want]);
  }
  return out.map(([a, b, sig]) => `${a.toString(16)}${a === b ? "" : "-" + b.toString(16)}:${sig}`).join(",");
}

let differences: { re: RegExp; ranges: [number, number, number][] } | null | undefined;

function v8Differences(): { re: RegExp; ranges: [number, number, number][] } | null {
  if (differences === undefined) {
    // another ICU than the one measured: measure again (once per thread)
    const spec = process.versions.unicode === V8_DIFFERENCES_UNICODE ? V8_DIFFERENCES : computeV8Differences();
    if (spec === "") differences = null;
    else {
      const ranges = spec.split(",").map((r): [number, number, number] => {
        const [span, sig] = r.split(":");
        const [[a, b]] = parseRanges(span!) as [[number, number]];
        return [a, b, Number(sig)];
      });
      const cls = ranges.map(([a, b]) => (a === b ? `\\u{${a.toString(16)}}` : `\\u{${a.toString(16)}}-\\u{${b.toString(16)}}`)).join("");
      differences = { re: new RegExp(`[${cls}]`, "gu"), ranges };
    }
  }
  return differences;
}

/** Text of the same UTF-16 length that V8's `\p{…}` classes as Unicode 16 does. */
export function forV8(text: string): string {
  const d = v8Differences();
  if (d === null) return text;
  d.re.lastIndex = 0;
  if (!d.re.test(text)) return text;
  return text.replace(d.re, (ch) => {
    const c = ch.codePointAt(0)!;
    let sig = 0;
    for (const [a, b, s] of d.ranges) if (c >= a && c <= b) sig = s;
    const stand = STAND_IN[sig];
    if (!stand) throw new Error(`bug: no stand-in for signature ${sig}`);
    return ch.length === 1 ? stand[0] : stand[1];
  });
}

/** tiktoken receives text as UTF-8 (wasm-bindgen's TextEncoder): lone surrogates become U+FFFD. */
export function wellFormed(text: string): string {
  return /[\ud800-\udfff]/.test(text) ? text.replace(/\p{Cs}/gu, "\ufffd") : text;
}

/** Unicode White_Space (Rust's `\s`), for one UTF-16 code unit. */
export function isWhiteSpace(c: number): boolean {
  if (c < 0x80) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  return (
    c === 0x85 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000
  );
}

/** UTF-8 length of text[from, to) (well-formed: a surrogate pair counts 2 + 2). */
export function utf8Length(text: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    n += c < 0x80 ? 1 : c < 0x800 || (c >= 0xd800 && c <= 0xdfff) ? 2 : 3;
  }
  return n;
}
