/**
 * `encode_ordinary` with a cost of O(n log n) in a piece's length.
 *
 * tiktoken's WASM merges the bytes of a pre-tokenizer piece in O(n·m) time
 * (n bytes, m merges), so one 120,000-character word takes ~18 s. It is fast
 * for everything else, so it keeps the common case: a linear pre-scan
 * (`longRunRanges`) proves that most texts hold no piece longer than
 * `threshold` bytes and hands them to tiktoken whole. Otherwise the text is
 * split with the ported pre-tokenizer around the flagged ranges only; runs of
 * short pieces still go to tiktoken in one call each (BPE never crosses a
 * piece boundary, so encoding a concatenation of whole pieces equals
 * concatenating their encodings), and each long piece goes through the heap
 * merge of bpe.ts, whose bytes→rank lookup is built on the first long piece.
 */
import type { VocabTable } from "../core/vocab.js";
import { ByteRanks, bytePairEncode } from "./bpe.js";
import { forV8, isWhiteSpace, longRunRanges, o200kRegExp, pieceStartAtOrBefore, utf8Length, wellFormed } from "./pretokenize.js";

/** Pieces longer than this many UTF-8 bytes skip tiktoken (see bench/bpe-bench.ts). */
export const LONG_PIECE_BYTES = 256;

export interface OrdinaryEncoderOptions {
  /** tiktoken's `encode_ordinary`. */
  encodeShort(text: string): ArrayLike<number>;
  /** Vocabulary bytes; ids [0, ordinaryLimit) are the ranks. */
  table: VocabTable;
  ordinaryLimit: number;
  threshold?: number;
}

export interface OrdinaryEncoder {
  encode(text: string): number[];
  /** What the long-piece path has cost so far. */
  stats(): { lookupBuilt: boolean; lookupBytes: number; lookupBuildMs: number; longPieces: number };
}

/** Typed array → array; ~6× faster than Array.from for 200k ids. */
function toArray(ids: ArrayLike<number>): number[] {
  const out = new Array<number>(ids.length);
  for (let i = 0; i < ids.length; i++) out[i] = ids[i]!;
  return out;
}

export function createOrdinaryEncoder(opts: OrdinaryEncoderOptions): OrdinaryEncoder {
  const threshold = opts.threshold ?? LONG_PIECE_BYTES;
  const encodeShort = opts.encodeShort;
  const utf8 = new TextEncoder();
  const re = o200kRegExp();
  let ranks: ByteRanks | undefined;
  let lookupBuildMs = 0;
  let longPieces = 0;

  const lookup = (): ByteRanks => {
    if (!ranks) {
      const t0 = performance.now();
      ranks = new ByteRanks(opts.table, opts.ordinaryLimit);
      lookupBuildMs = performance.now() - t0;
    }
    return ranks;
  };

  const append = (out: number[], ids: ArrayLike<number>): void => {
    for (let i = 0; i < ids.length; i++) out.push(ids[i]!);
  };

  // BPE never crosses a piece, but the pattern's `\s+(?!\S)` looks one code
  // point past a piece: whitespace at the end of a chunk cut before a
  // non-space (e.g. "\u3000\u3000" before "::::") splits differently when the
  // chunk is encoded alone, where the lookahead sees the end of text. So a
  // chunk ending in whitespace cut before a non-space gets a "0" appended: a
  // piece of its own after whitespace, which the lookahead sees as the
  // non-space it was; its id is dropped.
  const zero = encodeShort("0");
  if (zero.length !== 1) throw new Error("'0' is not one token");
  const zeroId = zero[0]!;
  const encodeBefore = (out: number[], text: string, from: number, to: number): void => {
    if (!isWhiteSpace(text.charCodeAt(to - 1)) || isWhiteSpace(text.charCodeAt(to))) {
      append(out, encodeShort(text.slice(from, to)));
      return;
    }
    const ids = encodeShort(text.slice(from, to) + "0");
    if (ids[ids.length - 1] !== zeroId) throw new Error("chunk + '0' did not end with the id of '0'");
    for (let i = 0; i < ids.length - 1; i++) out.push(ids[i]!);
  };

  const encode = (input: string): number[] => {
    // no piece can exceed `threshold` bytes: a code unit is at most 3 bytes
    if (input.length * 3 <= threshold) return toArray(encodeShort(input));
    const ranges = longRunRanges(input, threshold);
    if (ranges.length === 0) return toArray(encodeShort(input));
    const text = wellFormed(input);
    const masked = forV8(text); // what the pattern runs on (same length)
    const out: number[] = [];
    let pending = 0; // text[pending, cursor) is whole pieces not yet encoded
    let cursor = 0; // a piece start; pieces before it have been looked at
    for (let r = 0; r < ranges.length; r += 2) {
      const from = ranges[r]!;
      const to = ranges[r + 1]!;
      if (to <= cursor) continue;
      let at = from > cursor ? pieceStartAtOrBefore(text, from, cursor) : cursor;
      while (at < to) {
        re.lastIndex = at;
        const m = re.exec(masked);
        if (!m || m.index !== at) throw new Error(`o200k pattern: no piece at ${at}`);
        const end = at + m[0].length;
        if ((end - at) * 3 > threshold && utf8Length(text, at, end) > threshold) {
          if (at > pending) encodeBefore(out, text, pending, at);
          bytePairEncode(utf8.encode(text.slice(at, end)), lookup(), out);
          longPieces++;
          pending = end;
        }
        at = end;
      }
      cursor = at;
    }
    if (pending < text.length) append(out, encodeShort(pending === 0 ? text : text.slice(pending)));
    return out;
  };

  return {
    encode,
    stats: () => ({ lookupBuilt: ranks !== undefined, lookupBytes: ranks?.byteLength ?? 0, lookupBuildMs, longPieces }),
  };
}
