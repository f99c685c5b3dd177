/** Shared test fixtures: one vocabulary per test file (built once, ~0.5 s). */
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Vocabulary } from "../src/core/vocab.js";
import { loadHarmonyEncoding, type HarmonyEncoding } from "../src/vocab/index.js";

let cached: { enc: HarmonyEncoding; vocab: Vocabulary } | undefined;

export function harmony(): { enc: HarmonyEncoding; vocab: Vocabulary } {
  if (!cached) {
    const enc = loadHarmonyEncoding();
    cached = { enc, vocab: new Vocabulary(enc.table) };
  }
  return cached;
}

export const FIXTURES = fileURLToPath(new URL("./fixtures/", import.meta.url));

export interface ConformanceCase {
  id: string;
  kind: "wellformed" | "malformed";
  fault: string | null;
  role: string | null;
  tokens: number[];
  text: string;
  reference: { messages: unknown[]; first_error: null | { message: string; index: number | "eos"; token?: number } };
  reference_non_strict: { messages: unknown[]; first_error: unknown };
  intended: { messages: unknown[] };
  detail: Record<string, unknown>;
}

export function loadJsonl(name: string): ConformanceCase[] {
  return readFileSync(`${FIXTURES}conformance/${name}`, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as ConformanceCase);
}

export function loadReferenceCases(): { file: string; data: any }[] {
  const dir = `${FIXTURES}conformance/reference-cases/`;
  return readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((file) => ({ file, data: JSON.parse(readFileSync(dir + file, "utf8")) }));
}

/** A deterministic PRNG (mulberry32) for chunkings: the load tester's. */
export { rng } from "../src/loadtest/generate.js";
