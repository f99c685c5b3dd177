/**
 * The o200k_harmony encoding a process or thread works with: the per-token
 * table (read from the table file, ./table-file.ts, optionally on
 * SharedArrayBuffers so worker threads reuse it as is) and text → ids in
 * plain JS (./ordinary.ts), with the same ids as tiktoken's
 * `encode(text, "all")`.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { HARMONY, type HarmonyPreset } from "../core/preset.js";
import type { VocabTable } from "../core/vocab.js";
import { ByteRanks } from "./bpe.js";
import { createOrdinaryEncoder } from "./ordinary.js";
import { encodeTableFile, readTableFile, TABLE_FILE_NAME, writeTableFile } from "./table-file.js";
import { buildFromTiktoken, ranksChecksum, specialsMap } from "./tiktoken.js";

export interface HarmonyEncoding {
  readonly preset: HarmonyPreset;
  readonly table: VocabTable;
  /** Text with special tokens written out → ids: tiktoken's `encode(text, "all")` ids. */
  encode(text: string): number[];
  /** Ordinary text → ids (special-looking text stays text): tiktoken's `encode_ordinary` ids, in O(n log n) for long pieces. */
  encodeOrdinary(text: string): number[];
  /** Where the table came from: the table file, or built from tiktoken (the file was missing or stale). */
  readonly source: "file" | "tiktoken";
  /** Why the table was built rather than read, and whether the file could be written then ("" when it was read). */
  readonly note: string;
  /** Milliseconds spent getting the table and the encoder ready. */
  readonly loadMs: number;
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

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * The table file's place: beside the built module (dist/src/vocab/), or,
 * for code run from src/ (tests), the build's.
 */
export function tableFilePath(): string {
  const built = [here, path.join(here, "../../dist/src/vocab")].find((d) => existsSync(path.join(d, "encoding.js")));
  return path.join(built ?? here, TABLE_FILE_NAME);
}

export interface LoadOptions {
  /** Put the table on SharedArrayBuffers (for sharing with worker threads). */
  shared?: boolean;
  /** The table file to read, and write when it is missing or stale (default: tableFilePath()). */
  file?: string;
}

export function loadHarmonyEncoding(opts: LoadOptions = {}): HarmonyEncoding {
  const preset = HARMONY;
  const t0 = performance.now();
  const shared = opts.shared ?? false;
  const file = opts.file ?? tableFilePath();
  const checksum = ranksChecksum(preset);
  let data = readTableFile(file, { checksum, size: preset.vocabLimit, ordinaryLimit: preset.firstSpecial }, shared);
  let note = "";
  if (typeof data === "string") {
    note = `${file}: ${data}; built from tiktoken`;
    data = buildFromTiktoken(preset, shared);
    try {
      writeTableFile(file, encodeTableFile(data, checksum));
      note += " and written";
    } catch (e) {
      note += `, not written (${(e as Error).message})`;
    }
  }
  const ranks = new ByteRanks(data.table, data.ordinaryLimit, data.ranks);
  const ordinary = createOrdinaryEncoder(ranks);
  const specials = specialsMap(preset);
  return {
    preset,
    table: data.table,
    source: note === "" ? "file" : "tiktoken",
    note,
    loadMs: performance.now() - t0,
    encode: (text) => encodeWithSpecials(text, specials, ordinary),
    encodeOrdinary: ordinary,
  };
}
