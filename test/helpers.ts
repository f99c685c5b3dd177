/** Shared test fixtures: one vocabulary per test file (read once from the table file). */
import { spawn, type SpawnOptions } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import fc from "fast-check";
import { fileURLToPath } from "node:url";
import { Vocabulary } from "../src/core/vocab.js";
import { FAULT_KINDS } from "../src/loadtest/generate.js";
import type { LoadtestOptions } from "../src/loadtest/run.js";
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
  /** What resilient mode must give: the intended messages, cut at the end of a primed completion (rule 8). */
  resilient: { messages: unknown[]; after_stop?: boolean };
  detail: Record<string, unknown>;
}

export function loadJsonl(name: string): ConformanceCase[] {
  return readFileSync(`${FIXTURES}conformance/${name}`, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as ConformanceCase);
}

/** One of the reference's own vectors (conformance/reference-cases/*.json, described in that folder's README). */
export interface ReferenceCase {
  name: string;
  source: string;
  kind: string;
  parser: { role: string | null; strict: boolean; call_process_eos_at_end: boolean; on_error: string };
  input_pieces?: string[];
  input_decoded?: string;
  tokens: number[];
  trace?: unknown;
  expected: {
    messages: unknown[];
    errors: { at_token_index: number; token: number; message: string; message_with_context_chain?: string }[];
    process_eos?: { ok: boolean; message?: string } | null;
    final_state: string;
    current_content_after?: string;
    last_content_delta_after?: string | null;
  };
}

/**
 * JSON a test reads back from a server under test and takes apart with `expect`: the
 * assertions are what check its shape, so its type is JSON.parse's own.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed JSON whose shape the assertions check
export type Json = any;

export function loadReferenceCases(): { file: string; data: ReferenceCase }[] {
  const dir = `${FIXTURES}conformance/reference-cases/`;
  return readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((file) => ({ file, data: JSON.parse(readFileSync(dir + file, "utf8")) }));
}

/** A deterministic PRNG (mulberry32) for chunkings: the load tester's. */
export { rng } from "../src/loadtest/generate.js";

/** Whether JSON.parse takes `t` (what isJson and valid_json must say). */
export function parsesAsJson(t: string): boolean {
  try {
    JSON.parse(t);
    return true;
  } catch {
    return false;
  }
}

/**
 * JSON (from fc.json()) with one of `inserts` put in at a random place,
 * replacing the character there on every other draw: texts that are JSON
 * or just not, for checks that must agree with JSON.parse.
 */
export function mutatedJson(inserts: readonly string[]): fc.Arbitrary<string> {
  return fc.tuple(fc.json(), fc.nat(), fc.constantFrom(...inserts)).map(([j, at, c]) => {
    const k = at % (j.length + 1);
    return j.slice(0, k) + c + j.slice(k + (at % 2));
  });
}

const FC_SEED = process.env.FC_SEED === undefined ? undefined : Number(process.env.FC_SEED);
/** FC_SCALE=<k> multiplies every property's number of runs (for a longer soak). */
const FC_SCALE = Number(process.env.FC_SCALE ?? 1) || 1;

/**
 * fast-check parameters for every property test: `runs` runs (times
 * FC_SCALE), replaying FC_SEED when it is set; `examples` run first on
 * every run (regression cases for bugs the properties found).
 */
export function fcParams<Ts>(runs: number, examples: NoInfer<Ts>[] = []): fc.Parameters<Ts> {
  // fast-check runs a property 0 times when numRuns is NaN: a call without runs must fail, not pass
  if (!(runs >= 1)) throw new Error(`fcParams: the number of runs must be at least 1, not ${String(runs)}`);
  const numRuns = Math.max(1, Math.round(runs * FC_SCALE));
  return FC_SEED === undefined ? { numRuns, examples } : { numRuns, examples, seed: FC_SEED };
}

/**
 * One tool-using turn about the weather in Oslo, as tests script an engine
 * with it: the reasoning, the completion that reasons and calls
 * `get_weather`, the final answer after the tool's result, and the tool as a
 * Responses request declares it.
 */
export const WEATHER = Object.freeze({
  cot: "The user wants the weather in Oslo. Call get_weather.",
  get call(): string {
    return `<|channel|>analysis<|message|>${this.cot}<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>`;
  },
  answer: "<|channel|>final<|message|>It is 3 °C in Oslo.<|return|>",
  responsesTools: [
    {
      type: "function" as const,
      name: "get_weather",
      strict: false,
      parameters: { type: "object", properties: { city: { type: "string" } } },
    },
  ],
});

/**
 * Assert two byte strings are equal: compared natively (expect's deep
 * equality walks a buffer element by element, which made property tests over
 * megabytes of frames take minutes on a busy machine); on a difference,
 * the first differing range is shown.
 */
export function expectSameBytes(got: Uint8Array, want: Uint8Array, what = "bytes"): void {
  const a = Buffer.from(got.buffer, got.byteOffset, got.byteLength);
  const b = Buffer.from(want.buffer, want.byteOffset, want.byteLength);
  if (a.equals(b)) return;
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  const around = (x: Buffer) => x.subarray(Math.max(0, i - 16), i + 16).toString("hex");
  throw new Error(`${what} differ at byte ${i} of ${a.length} (want ${b.length}): got …${around(a)}…, want …${around(b)}…`);
}

/** A child process run to its end: its exit code and all it wrote. */
export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `command` with `args` (stdin closed), collecting its output until it exits. */
export function runProcess(command: string, args: string[], options: SpawnOptions = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (c) => (stdout += c));
    child.stderr!.on("data", (c) => (stderr += c));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** Load-test options for a short run against an in-process server: every fault kind, random chunking, no progress bar; `over` says the rest. */
export function loadtestOptions(over: Partial<LoadtestOptions> = {}): LoadtestOptions {
  return {
    streams: 100,
    concurrency: 64,
    streamsPerFrame: 32,
    chunking: "random",
    stepTokens: 4,
    faultRate: 0.3,
    faults: [...FAULT_KINDS],
    seed: 7,
    durationSec: 0,
    mode: "resilient",
    window: 8,
    compareStrict: false,
    progress: false,
    ...over,
  };
}
