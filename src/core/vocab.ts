/**
 * Per-token lookup tables. Built once (see src/vocab/) and shared between
 * threads: the three arrays may sit on SharedArrayBuffers, so a worker wraps
 * them in a `Vocabulary` without recomputing anything.
 */
import { decodeLossy, decodeValidUtf8, scanUtf8 } from "./utf8.js";

function decodeLossyText(b: Uint8Array): string {
  return decodeLossy(b, 0, b.length, new Int32Array(2));
}

/** Token bytes are complete, valid UTF-8 on their own. */
export const FLAG_WHOLE = 1;
/** Token is a special (control or reserved) token. */
export const FLAG_SPECIAL = 2;
/** Token text contains whitespace (Unicode White_Space). */
export const FLAG_SPACE = 4;
/** Ordinary token whose text has a character no header word holds (not an ASCII identifier character). */
export const FLAG_PROSE = 8;

/**
 * Ordinary token whose bytes hold no `"`, `\` or control character (< 0x20):
 * inside a JSON string the whole token is string content (isJsonTokens skips it).
 */
export const FLAG_JSON_PLAIN = 16;

/** Ordinary token whose text holds a line feed: it ends a line (the parser's repetition check reads lines). */
export const FLAG_NEWLINE = 32;

const NOT_HEADER_CHAR = /[^\sA-Za-z0-9_.\-:/@+=]/u;

const WHITESPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;

export interface VocabTable {
  /** Number of ids; every id in [0, size) decodes. */
  readonly size: number;
  /** size + 1 byte offsets into `bytes`. */
  readonly offsets: Uint32Array;
  readonly bytes: Uint8Array;
  readonly flags: Uint8Array;
}

/** Build a table from per-id byte strings (used by loaders and tests). */
export function buildVocabTable(
  size: number,
  bytesOf: (id: number) => Uint8Array,
  isSpecial: (id: number) => boolean,
  alloc: (byteLength: number) => ArrayBufferLike = (n) => new ArrayBuffer(n),
): VocabTable {
  const parts: Uint8Array[] = new Array(size);
  let total = 0;
  for (let id = 0; id < size; id++) {
    const b = bytesOf(id);
    parts[id] = b;
    total += b.length;
  }
  const offsets = new Uint32Array(alloc((size + 1) * 4));
  const bytes = new Uint8Array(alloc(total));
  const flags = new Uint8Array(alloc(size));
  const scratch = new Int32Array(2);
  let at = 0;
  for (let id = 0; id < size; id++) {
    const b = parts[id]!;
    offsets[id] = at;
    bytes.set(b, at);
    scanUtf8(b, 0, b.length, scratch);
    let f = scratch[1] === -1 ? FLAG_WHOLE : 0;
    if (isSpecial(id)) f |= FLAG_SPECIAL;
    // whitespace bytes are ASCII or start with 0xc2/0xe1/0xe2/0xe3; test only those tokens
    if (b.some((x) => x <= 0x20 || x === 0xc2 || (x >= 0xe1 && x <= 0xe3))) {
      if (WHITESPACE.test(decodeLossyText(b))) f |= FLAG_SPACE;
    }
    if ((f & FLAG_SPECIAL) === 0 && NOT_HEADER_CHAR.test(decodeLossyText(b))) f |= FLAG_PROSE;
    if ((f & FLAG_SPECIAL) === 0 && b.every((x) => x >= 0x20 && x !== 0x22 && x !== 0x5c)) f |= FLAG_JSON_PLAIN;
    if ((f & FLAG_SPECIAL) === 0 && b.includes(0x0a)) f |= FLAG_NEWLINE;
    flags[id] = f;
    at += b.length;
  }
  offsets[size] = at;
  return { size, offsets, bytes, flags };
}

/**
 * A view over a table with a lazily filled string cache (one per thread:
 * strings cannot be shared, bytes can).
 */
export class Vocabulary {
  readonly size: number;
  readonly offsets: Uint32Array;
  readonly bytes: Uint8Array;
  readonly flags: Uint8Array;
  private readonly strings: (string | undefined)[];
  /** Scratch space for UTF-8 scans, shared by the parsers of this thread (used synchronously only). */
  readonly scratch = new Int32Array(2);
  /** idOfText's answers. */
  private readonly byText = new Map<string, number>();

  constructor(table: VocabTable) {
    this.size = table.size;
    this.offsets = table.offsets;
    this.bytes = table.bytes;
    this.flags = table.flags;
    this.strings = new Array<string | undefined>(table.size);
  }

  /** True for ids that decode (integers in [0, size)). */
  isToken(id: number): boolean {
    return Number.isInteger(id) && id >= 0 && id < this.size;
  }

  /** Decoded text of a token whose bytes are whole UTF-8 (FLAG_WHOLE). */
  text(id: number): string {
    let s = this.strings[id];
    if (s === undefined) {
      s = decodeValidUtf8(this.bytes, this.offsets[id]!, this.offsets[id + 1]!);
      this.strings[id] = s;
    }
    return s;
  }

  /**
   * The id of the ordinary token whose text is exactly `text`, or -1. Found
   * by one scan of the table the first time a text is asked for (about a
   * millisecond), remembered since.
   */
  idOfText(text: string): number {
    const known = this.byText.get(text);
    if (known !== undefined) return known;
    const want = new TextEncoder().encode(text);
    let found = -1;
    const { offsets, bytes, flags } = this;
    for (let id = 0; id < this.size && found < 0 && want.length > 0; id++) {
      const a = offsets[id]!;
      if (offsets[id + 1]! - a !== want.length || (flags[id]! & FLAG_SPECIAL) !== 0) continue;
      let k = 0;
      while (k < want.length && bytes[a + k] === want[k]) k++;
      if (k === want.length) found = id;
    }
    if (this.byText.size < 64) this.byText.set(text, found);
    return found;
  }

  byteStart(id: number): number {
    return this.offsets[id]!;
  }

  byteEnd(id: number): number {
    return this.offsets[id + 1]!;
  }
}
