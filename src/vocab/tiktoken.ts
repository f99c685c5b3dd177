/**
 * Builds the o200k_harmony vocabulary from the `tiktoken` package's WASM
 * tokenizer: o200k_base ranks plus the Harmony specials exactly as
 * openai-harmony v0.0.8 registers them. The per-token table is computed once
 * here (one WASM call per id, at start-up only) and can live on
 * SharedArrayBuffers so worker threads reuse it as is.
 */
import { Tiktoken } from "tiktoken/lite";
import o200k from "tiktoken/encoders/o200k_base.json" with { type: "json" };
import { HARMONY, specialText, type HarmonyPreset } from "../core/preset.js";
import { buildVocabTable, type VocabTable } from "../core/vocab.js";
import { createOrdinaryEncoder, type OrdinaryEncoder } from "./ordinary.js";

export interface HarmonyEncoding {
  readonly preset: HarmonyPreset;
  readonly table: VocabTable;
  /**
   * Text with special tokens written out → ids: tiktoken's
   * `encode(text, "all")` ids, the text between specials through
   * {@link encodeOrdinary} (so in O(n log n) for long pieces too; tiktoken's
   * own grows with the square of a long word's length).
   */
  encode(text: string): number[];
  /**
   * Ordinary text → ids (special-looking text stays text): tiktoken's
   * `encode_ordinary` ids, in O(n log n) for long pieces (see ordinary.ts).
   */
  encodeOrdinary(text: string): number[];
  /** The long-piece path's lookup and counters. */
  ordinaryStats: OrdinaryEncoder["stats"];
  /** Milliseconds spent building the table. */
  readonly buildMs: number;
}

function specialsMap(preset: HarmonyPreset): Record<string, number> {
  const map: Record<string, number> = {};
  for (let id = preset.firstSpecial; id < preset.vocabLimit; id++) map[specialText(preset, id)!] = id;
  return map;
}

/** Anything written like a special token; the specials map says which ones are. */
const SPECIAL_LIKE = /<\|[^|<>]{1,64}\|>/g;

/**
 * `text` → ids, every special token written out as itself taken as that
 * special, the text around them as ordinary text: what tiktoken's
 * `encode(text, "all")` gives (leftmost match; two specials cannot overlap,
 * each ends at its first `|>`).
 */
export function encodeWithSpecials(text: string, specials: Readonly<Record<string, number>>, ordinary: (t: string) => number[]): number[] {
  const out: number[] = [];
  const push = (ids: number[]) => {
    for (const id of ids) out.push(id);
  };
  let last = 0;
  const re = new RegExp(SPECIAL_LIKE.source, "g");
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const id = specials[m[0]];
    if (id === undefined) {
      re.lastIndex = m.index + 1; // text that only looks special: it may hide a real one after its "<|"
      continue;
    }
    if (m.index > last) push(ordinary(text.slice(last, m.index)));
    out.push(id);
    last = m.index + m[0].length;
  }
  if (last < text.length) push(ordinary(text.slice(last)));
  return out;
}

export interface LoadOptions {
  /** Put the table on SharedArrayBuffers (for sharing with worker threads). */
  shared?: boolean;
}

export function loadHarmonyEncoding(opts: LoadOptions = {}): HarmonyEncoding {
  const preset = HARMONY;
  const t0 = performance.now();
  const specials = specialsMap(preset);
  const enc = new Tiktoken(o200k.bpe_ranks, specials, o200k.pat_str);
  const table = buildVocabTable(
    preset.vocabLimit,
    (id) => enc.decode_single_token_bytes(id),
    (id) => id >= preset.firstSpecial,
    opts.shared ? (n) => new SharedArrayBuffer(n) : undefined,
  );
  const buildMs = performance.now() - t0;
  const ordinary = createOrdinaryEncoder({
    encodeShort: (text) => enc.encode_ordinary(text),
    table,
    ordinaryLimit: preset.firstSpecial,
  });
  return {
    preset,
    table,
    buildMs,
    encode: (text) => encodeWithSpecials(text, specials, ordinary.encode),
    encodeOrdinary: ordinary.encode,
    ordinaryStats: ordinary.stats,
  };
}
