/** Helpers for reading parsed JSON (untrusted values): one home for the shape checks every reader needs. */
import { FLAG_JSON_PLAIN, type Vocabulary } from "./vocab.js";

/** A JSON object (not null, not an array). */
export type JsonObject = Record<string, unknown>;

/** Whether a parsed JSON value is an object (not null, not an array). */
export function isObj(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Deepest JSON nesting accepted from a client (frames, HTTP bodies, render requests). */
export const MAX_JSON_DEPTH = 64;

/** The index of the `"` that closes the string opened at `open` (one not escaped by an odd run of backslashes), or -1. */
function closingQuote(text: string, open: number): number {
  for (let from = open + 1; ;) {
    const q = text.indexOf('"', from);
    if (q === -1) return -1;
    let b = q - 1;
    while (b > open && text.charCodeAt(b) === 0x5c) b--;
    if (((q - 1 - b) & 1) === 0) return q;
    from = q + 1;
  }
}

/**
 * Whether JSON text nests deeper than `max` arrays and objects, by one
 * linear scan that skips strings (no recursion, no parse): checked before
 * `JSON.parse`, so that nothing downstream recurses over a hostile value.
 *
 * A string is skipped with `indexOf` (native: a megabytes-long stream name
 * is skipped in a fraction of a character loop's time); a quote is the string's end unless an odd run of backslashes
 * precedes it (each run is counted once: still linear). Text with no more
 * than `max` opening brackets in all cannot nest deeper: they are counted
 * first, with `indexOf` too, so that most texts skip the scan.
 */
export function jsonTooDeep(text: string, max: number = MAX_JSON_DEPTH): boolean {
  let opens = 0;
  for (let i = text.indexOf("["); i !== -1 && opens <= max; i = text.indexOf("[", i + 1)) opens++;
  for (let i = text.indexOf("{"); i !== -1 && opens <= max; i = text.indexOf("{", i + 1)) opens++;
  if (opens <= max) return false;
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      i = closingQuote(text, i);
      if (i === -1) return false; // unterminated: JSON.parse refuses it
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/** A run of characters that are none of `"`, `[`, `]`, `{`, `}`: skipped in one native step. */
const PLAIN_RUN = /[^"[\]{}]+/y;

/**
 * {@link jsonTooDeep} for long text that is mostly plain runs (digits,
 * commas, spaces between few brackets: an engine's event of 300,000 ids),
 * each run skipped by a sticky regular expression: faster there, but
 * slower on short, bracket-dense text (a step frame), which keeps
 * {@link jsonTooDeep}. Same answer on every text.
 */
export function jsonTooDeepLong(text: string, max: number = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    PLAIN_RUN.lastIndex = i;
    if (PLAIN_RUN.test(text)) {
      i = PLAIN_RUN.lastIndex;
      if (i >= n) break;
    }
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      i = closingQuote(text, i);
      if (i === -1) return false; // unterminated: JSON.parse refuses it
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

export type JsonParse = { ok: true; value: unknown } | { ok: false; code: "too_deep" | "bad_json"; message: string };

/**
 * Parse client JSON: refused when it nests deeper than `max`, or is not JSON
 * (the message is short and flat). `tooDeep` is the depth check
 * ({@link jsonTooDeepLong} for text known to be long runs of numbers).
 */
export function parseJson(text: string, max: number = MAX_JSON_DEPTH, tooDeep: typeof jsonTooDeep = jsonTooDeep): JsonParse {
  if (tooDeep(text, max)) return { ok: false, code: "too_deep", message: `JSON nested deeper than ${max} levels` };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (e) {
    return { ok: false, code: "bad_json", message: String((e as Error).message).slice(0, 200) };
  }
}

/**
 * A short, flat description of a client value for an error message: a
 * number, a string (cut to 40 characters), or its kind. Never walks into
 * the value (a message must not recurse over, or copy, what a client sent).
 */
export function describeValue(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return `an array of ${v.length}`;
  switch (typeof v) {
    case "string":
      return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
    case "number":
    case "boolean":
      return String(v);
    case "object":
      return "an object";
    default:
      return typeof v;
  }
}

/** Whether text is JSON, as JSON.parse would take it (RFC 8259), without building anything. */
export function isJson(text: string): boolean {
  // checked as UTF-8: the verdict is the same (JSON's structure is ASCII;
  // a lone surrogate, which JSON.parse takes inside a string, becomes
  // U+FFFD, which it takes there too)
  const need = 3 * text.length + 1;
  const buf = need <= TEXT_BYTES.length ? TEXT_BYTES : new Uint8Array(need);
  const { written } = ENCODER.encodeInto(text, buf);
  return isJsonBytes(buf, written);
}

const ENCODER = new TextEncoder();
/** Scratch for isJson's UTF-8 (longer texts get a buffer of their own, not kept). */
const TEXT_BYTES = new Uint8Array(16 * 1024);

/**
 * Whether the UTF-8 bytes `b[0, n)` are JSON, as JSON.parse would take
 * their text, without building anything. `b` must have room for one more
 * byte: `b[n]` is overwritten with a NUL, which ends every scan (no JSON
 * value holds a raw NUL), so no read goes past it.
 */
export function isJsonBytes(b: Uint8Array, n: number): boolean {
  // One pass with an explicit stack of open containers (no recursion, no
  // allocation but the stack): every tool call's arguments are checked, and
  // JSON.parse, which builds the value, cost a fifth of the parser's time.
  b[n] = 0;
  let stack = JSON_STACK;
  let depth = 0;
  let i = skipWs(b, 0);
  // after a value: what may follow depends on the container it is in
  for (;;) {
    // a value
    if (i >= n) return false;
    const c = b[i]!;
    if (c === 0x7b || c === 0x5b) {
      stack = roomOnStack(stack, depth);
      stack[depth++] = c;
      i = skipWs(b, i + 1);
      if (b[i] === c + 2) {
        // {} or []
        depth--;
        i++;
      } else {
        if (c === 0x7b) {
          i = key(b, i);
          if (i < 0) return false;
        }
        continue;
      }
    } else if (c === 0x22) {
      i = stringEnd(b, i);
      if (i < 0) return false;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      i = numberEnd(b, i);
      if (i < 0) return false;
    } else if (c === 0x74 && b[i + 1] === 0x72 && b[i + 2] === 0x75 && b[i + 3] === 0x65)
      i += 4; // true
    else if (c === 0x66 && b[i + 1] === 0x61 && b[i + 2] === 0x6c && b[i + 3] === 0x73 && b[i + 4] === 0x65)
      i += 5; // false
    else if (c === 0x6e && b[i + 1] === 0x75 && b[i + 2] === 0x6c && b[i + 3] === 0x6c)
      i += 4; // null
    else return false;
    // what follows a value
    for (;;) {
      i = skipWs(b, i);
      if (depth === 0) return i === n;
      const open = stack[depth - 1]!;
      const d = b[i];
      if (d === 0x2c) {
        i = skipWs(b, i + 1);
        if (open === 0x7b) {
          i = key(b, i);
          if (i < 0) return false;
        }
        break; // the next value
      }
      if (d !== open + 2) return false; // } closes {, ] closes [
      depth--;
      i++;
    }
  }
}

/** The stack isJsonBytes starts with (it grows a copy for deeper text). */
const JSON_STACK = new Uint8Array(64);

/** JSON's whitespace: space, line feed, carriage return, tab. */
const isWs = (c: number | undefined) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** What may follow a backslash in a JSON string, but for `u`: " \ / b f n r t. */
const isEscaped = (e: number) =>
  e === 0x22 || e === 0x5c || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74;

/** The stack of open containers, with room for one more (a copy twice the size when it is full). */
function roomOnStack(stack: Uint8Array<ArrayBuffer>, depth: number): Uint8Array<ArrayBuffer> {
  if (depth < stack.length) return stack;
  const grown = new Uint8Array(stack.length * 2);
  grown.set(stack);
  return grown;
}

// The scanners below read up to the NUL at b[n] and stop there.

function skipWs(b: Uint8Array, i: number): number {
  while (isWs(b[i])) i++;
  return i;
}

/** A member's `"key" :` from i (at the key's quote); where its value starts, or -1. */
function key(b: Uint8Array, i: number): number {
  if (b[i] !== 0x22) return -1;
  i = stringEnd(b, i);
  if (i < 0) return -1;
  i = skipWs(b, i);
  if (b[i] !== 0x3a) return -1;
  return skipWs(b, i + 1);
}

const isHex = (c: number) => (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);

/** Past the string that starts at i (its opening quote), or -1 (the NUL ends it as a control character). */
function stringEnd(b: Uint8Array, i: number): number {
  for (i++; ; i++) {
    const c = b[i]!;
    if (c === 0x22) return i + 1;
    if (c < 0x20) return -1;
    if (c === 0x5c) {
      const e = b[++i]!;
      if (e === 0x75) {
        if (!(isHex(b[i + 1]!) && isHex(b[i + 2]!) && isHex(b[i + 3]!) && isHex(b[i + 4]!))) return -1;
        i += 4;
      } else if (!isEscaped(e)) return -1;
    }
  }
}

const isDigit = (c: number) => c >= 0x30 && c <= 0x39;

/** Past the number that starts at i, or -1. */
function numberEnd(b: Uint8Array, i: number): number {
  if (b[i] === 0x2d) i++;
  const c = b[i]!;
  if (c === 0x30) i++;
  else if (c >= 0x31 && c <= 0x39) while (isDigit(b[i]!)) i++;
  else return -1;
  if (b[i] === 0x2e) {
    if (!isDigit(b[++i]!)) return -1;
    while (isDigit(b[i]!)) i++;
  }
  const e = b[i];
  if (e === 0x65 || e === 0x45) {
    const sign = b[++i];
    if (sign === 0x2b || sign === 0x2d) i++;
    if (!isDigit(b[i]!)) return -1;
    while (isDigit(b[i]!)) i++;
  }
  return i;
}

// isJsonTokens' states: what the next character may be
/** A value (the start, after `:`, after `,` in an array). */
const J_VALUE = 0;
/** After `{` or `[`: its close, or its first key or value. */
const J_OPENED = 1;
/** A key (after `,` in an object, or the first). */
const J_KEY = 2;
/** After a key: `:`. */
const J_COLON = 3;
/** After a value: `,`, the container's close, or (outside every container) only whitespace. */
const J_AFTER = 4;
/** Inside a string (a key's or a value's). */
const J_STRING = 5;
/** After a backslash in a string. */
const J_ESCAPE = 6;
/** In a `\uXXXX` escape. */
const J_HEX = 7;
/** In `true`, `false` or `null`. */
const J_LITERAL = 8;
// in a number: after `-`, after a leading 0, in the integer digits, after `.`, in the fraction, after
// `e`, after the exponent's sign, in the exponent
const J_MINUS = 9;
const J_ZERO = 10;
const J_INT = 11;
const J_DOT = 12;
const J_FRACTION = 13;
const J_E = 14;
const J_SIGN = 15;
const J_EXPONENT = 16;

/**
 * Whether the text of the whole-UTF-8 tokens `ids[from, to)` is JSON, as
 * `isJson` would say of their concatenation, without concatenating: one
 * pass over the tokens' own (flat) strings, a character at a time, with an
 * explicit stack (no recursion, no allocation but the stack). A token
 * flagged FLAG_JSON_PLAIN inside a string is skipped whole.
 *
 * A call's arguments that arrive as one run of tokens are checked this way
 * (docs/resilience.md, rule 12): the run's text is a chain of cons strings,
 * and checking it as a string would flatten and encode it first.
 */
export function isJsonTokens(vocab: Vocabulary, ids: ArrayLike<number>, from: number, to: number): boolean {
  const flags = vocab.flags;
  let stack = JSON_STACK;
  let depth = 0;
  let st = J_VALUE;
  let key = false; // the string being read is a member's key
  let left = 0; // hex digits left in a \u escape; the next character's place in a literal
  let literal = "";
  for (let t = from; t < to; t++) {
    const id = ids[t]!;
    if (st === J_STRING && (flags[id]! & FLAG_JSON_PLAIN) !== 0) continue;
    const s = vocab.text(id);
    const n = s.length;
    for (let k = 0; k < n; k++) {
      const c = s.charCodeAt(k);
      switch (st) {
        case J_STRING: {
          // the string's content runs to a quote or a backslash
          let d = c;
          while (d !== 0x22 && d !== 0x5c) {
            if (d < 0x20) return false;
            if (++k === n) break;
            d = s.charCodeAt(k);
          }
          if (d === 0x22) st = key ? J_COLON : J_AFTER;
          else if (d === 0x5c) st = J_ESCAPE;
          break;
        }
        case J_OPENED:
          if (isWs(c)) break;
          if (c === stack[depth - 1]! + 2) {
            // {} or []
            depth--;
            st = J_AFTER;
            break;
          }
          st = stack[depth - 1] === 0x7b ? J_KEY : J_VALUE;
          k--; // c begins the first member or element
          break;
        case J_VALUE:
          if (isWs(c)) break;
          if (c === 0x22) {
            st = J_STRING;
            key = false;
          } else if (c === 0x7b || c === 0x5b) {
            stack = roomOnStack(stack, depth);
            stack[depth++] = c;
            st = J_OPENED;
          } else if (c === 0x2d) st = J_MINUS;
          else if (c === 0x30) st = J_ZERO;
          else if (c >= 0x31 && c <= 0x39) st = J_INT;
          else if (c === 0x74 || c === 0x66 || c === 0x6e) {
            literal = c === 0x74 ? "true" : c === 0x66 ? "false" : "null";
            left = 1;
            st = J_LITERAL;
          } else return false;
          break;
        case J_KEY:
          if (isWs(c)) break;
          if (c !== 0x22) return false;
          st = J_STRING;
          key = true;
          break;
        case J_COLON:
          if (isWs(c)) break;
          if (c !== 0x3a) return false;
          st = J_VALUE;
          break;
        case J_AFTER:
          if (isWs(c)) break;
          if (depth === 0) return false;
          if (c === 0x2c) st = stack[depth - 1] === 0x7b ? J_KEY : J_VALUE;
          else if (c === stack[depth - 1]! + 2)
            depth--; // } closes {, ] closes [
          else return false;
          break;
        case J_ESCAPE:
          if (c === 0x75) {
            st = J_HEX;
            left = 4;
          } else if (isEscaped(c)) st = J_STRING;
          else return false;
          break;
        case J_HEX:
          if (!isHex(c)) return false;
          if (--left === 0) st = J_STRING;
          break;
        case J_LITERAL:
          if (c !== literal.charCodeAt(left)) return false;
          if (++left === literal.length) st = J_AFTER;
          break;
        case J_MINUS:
          if (c === 0x30) st = J_ZERO;
          else if (isDigit(c)) st = J_INT;
          else return false;
          break;
        case J_E:
          if (c === 0x2b || c === 0x2d) st = J_SIGN;
          else if (isDigit(c)) st = J_EXPONENT;
          else return false;
          break;
        case J_DOT:
        case J_SIGN:
          // a digit must follow
          if (!isDigit(c)) return false;
          st = st === J_DOT ? J_FRACTION : J_EXPONENT;
          break;
        default:
          // J_ZERO, J_INT, J_FRACTION, J_EXPONENT: the number goes on, or ends before c
          if (isDigit(c) && st !== J_ZERO) break;
          if (c === 0x2e && (st === J_ZERO || st === J_INT)) st = J_DOT;
          else if ((c === 0x65 || c === 0x45) && st !== J_EXPONENT) st = J_E;
          else {
            st = J_AFTER;
            k--; // c follows the number
          }
      }
    }
  }
  if (depth !== 0) return false;
  return st === J_AFTER || st === J_ZERO || st === J_INT || st === J_FRACTION || st === J_EXPONENT;
}
