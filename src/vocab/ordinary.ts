/**
 * `encode_ordinary` in plain JS, with the same ids as tiktoken's: text is
 * split by the ported pre-tokenizer (pretokenize.ts), and each piece is one
 * table lookup when it is a token itself (most are), else merged by the
 * heap BPE of bpe.ts, O(n log n) in its length.
 *
 * tiktoken's WASM is not needed to encode: building its tokenizer costs
 * time at every start, and it merges a long piece in O(n·m) time (n bytes,
 * m merges: quadratic on one long word).
 * This encoder starts from the table file's lookup at once and is as fast on
 * ordinary text (bench/bpe/main.ts measures both; README, "Layout").
 */
import type { ByteRanks } from "./bpe.js";
import { bytePairEncode } from "./bpe.js";
import { forV8, o200kRegExp, utf8Length, wellFormed } from "./pretokenize.js";

/** Ordinary text → ids (special-looking text stays text). */
export type OrdinaryEncode = (text: string) => number[];

/** The largest scratch buffer an encoder keeps between texts. */
const KEEP_BYTES = 1 << 20;

export function createOrdinaryEncoder(ranks: ByteRanks): OrdinaryEncode {
  const re = o200kRegExp();
  const utf8 = new TextEncoder();
  /** The UTF-8 of texts up to KEEP_BYTES long is written here; a longer text gets a buffer of its own. */
  let scratch = new Uint8Array(1024);

  return (input: string): number[] => {
    const out: number[] = [];
    if (input.length === 0) return out;
    // tiktoken receives text as UTF-8, so a lone surrogate is U+FFFD
    const text = wellFormed(input);
    const masked = forV8(text); // what the pattern runs on (same length)
    const need = text.length * 3;
    if (need > scratch.length && need <= KEEP_BYTES) scratch = new Uint8Array(Math.min(KEEP_BYTES, Math.max(need, scratch.length * 2)));
    const bytes = need <= scratch.length ? scratch : new Uint8Array(need);
    const written = utf8.encodeInto(text, bytes).written;
    let byte = 0; // where text[at] begins in bytes
    for (let at = 0; at < text.length;) {
      re.lastIndex = at;
      const m = re.exec(masked);
      if (!m || m.index !== at) throw new Error(`bug: o200k pattern: no piece at ${at}`);
      const stop = at + m[0].length;
      const to = byte + utf8Length(text, at, stop);
      bytePairEncode(bytes, ranks, out, byte, to);
      byte = to;
      at = stop;
    }
    if (byte !== written) throw new Error(`bug: o200k pattern: pieces cover ${byte} of ${written} bytes`);
    return out;
  };
}
