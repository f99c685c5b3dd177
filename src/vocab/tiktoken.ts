/**
 * Builds the o200k_harmony table from the `tiktoken` package: o200k_base
 * ranks plus the Harmony specials exactly as openai-harmony v0.0.8 registers
 * them, one WASM call per id (slow, which is why processes read the table
 * file instead). This runs when the table
 * file (./table-file.ts) is written at build time, or when a process finds
 * it missing or stale; tiktoken is loaded only then.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { specialText, type HarmonyPreset } from "../core/preset.js";
import { buildVocabTable } from "../core/vocab.js";
import { ByteRanks } from "./bpe.js";
import { TABLE_FORMAT, type TableData } from "./table-file.js";

const require = createRequire(import.meta.url);

/** tiktoken's o200k_base ranks file (JSON: `bpe_ranks`, `pat_str`, …). */
function ranksFile(): string {
  return require.resolve("tiktoken/encoders/o200k_base.json");
}

const specials = new WeakMap<HarmonyPreset, Readonly<Record<string, number>>>();

/** Every special token's text → its id (made once per preset). */
export function specialsMap(preset: HarmonyPreset): Readonly<Record<string, number>> {
  let map = specials.get(preset);
  if (map === undefined) {
    const m: Record<string, number> = {};
    for (let id = preset.firstSpecial; id < preset.vocabLimit; id++) m[specialText(preset, id)!] = id;
    map = Object.freeze(m);
    specials.set(preset, map);
  }
  return map;
}

/**
 * What a table is built from, as a SHA-256: the table file's format, the
 * ranks file's bytes and the preset's specials. A table file with another
 * checksum is rebuilt.
 */
export function ranksChecksum(preset: HarmonyPreset): Uint8Array {
  const h = createHash("sha256");
  h.update(`harmony-sidecar vocabulary table ${TABLE_FORMAT}\n`);
  h.update(readFileSync(ranksFile()));
  h.update(JSON.stringify({ vocabLimit: preset.vocabLimit, firstSpecial: preset.firstSpecial, specials: specialsMap(preset) }));
  return new Uint8Array(h.digest());
}

/** The table and its BPE lookup, built from tiktoken (on SharedArrayBuffers when `shared`). */
export function buildFromTiktoken(preset: HarmonyPreset, shared: boolean): TableData {
  const { Tiktoken } = require("tiktoken/lite") as typeof import("tiktoken/lite");
  const o200k = JSON.parse(readFileSync(ranksFile(), "utf8")) as { bpe_ranks: string; pat_str: string };
  const enc = new Tiktoken(o200k.bpe_ranks, specialsMap(preset), o200k.pat_str);
  try {
    const table = buildVocabTable(
      preset.vocabLimit,
      (id) => enc.decode_single_token_bytes(id),
      (id) => id >= preset.firstSpecial,
      shared ? (n) => new SharedArrayBuffer(n) : undefined,
    );
    const built = new ByteRanks(table, preset.firstSpecial);
    const slots = shared ? new Int32Array(new SharedArrayBuffer(built.slots.byteLength)) : built.slots;
    if (slots !== built.slots) slots.set(built.slots);
    return { table, ranks: { slots, maxTokenBytes: built.maxTokenBytes }, ordinaryLimit: preset.firstSpecial };
  } finally {
    enc.free();
  }
}
