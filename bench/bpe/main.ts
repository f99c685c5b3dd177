/**
 * encodeOrdinary (src/vocab/ordinary.ts, plain JS) against the `tiktoken`
 * package's WASM `encode_ordinary` (ids through Array.from), which it must
 * equal id for id:
 *   (a) 1 MiB of real model output (bench/data/mix-200k.txt decoded);
 *   (b) one word of 10k … 120k characters (tiktoken only while one run stays
 *       under ~20 s; its cost grows with the square of the word's length);
 *   (c) a 4 MiB request of long words (tiktoken extrapolated from (b));
 *   (d) single pieces of 64 … 1024 bytes;
 *   (e) short messages, a call each (what a render of a chat does).
 * Every figure is the median of `--runs` timed runs (after one warm-up).
 *
 *   node dist/bench/bpe/main.js [--runs 5] [--json]
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { Tiktoken } from "tiktoken/lite";
import { loadHarmonyEncoding } from "../../src/vocab/index.js";

const opts = new Command()
  .option("--runs <n>", "timed runs per figure (median reported)", (v) => Number(v), 5)
  .option("--max-ms <n>", "skip tiktoken where one run would take longer", (v) => Number(v), 20_000)
  .option("--json", "print JSON instead of Markdown", false)
  .parse()
  .opts<{ runs: number; maxMs: number; json: boolean }>();

const require = createRequire(import.meta.url);
const o200k = require("tiktoken/encoders/o200k_base.json") as { bpe_ranks: string; pat_str: string };
const ref = new Tiktoken(o200k.bpe_ranks, {}, o200k.pat_str);
const enc = loadHarmonyEncoding();
/** What encodeOrdinary was before: tiktoken's ids as an array. */
const tiktoken = (text: string) => Array.from(ref.encode_ordinary(text));
const ours = (text: string) => enc.encodeOrdinary(text);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

/** Median ms of `fn(text)`, each run repeated until it has taken ≥ minMs. */
function time(fn: (text: string) => unknown, text: string, runs = opts.runs, minMs = 50): number {
  fn(text);
  const out: number[] = [];
  for (let r = 0; r < runs; r++) {
    let n = 0;
    const t0 = performance.now();
    let t = t0;
    do {
      fn(text);
      n++;
      t = performance.now();
    } while (t - t0 < minMs);
    out.push((t - t0) / n);
  }
  return median(out);
}

function same(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const MiB = 1 << 20;
const rows: { case: string; bytes: number; tiktokenMs: number | null; oursMs: number; note: string }[] = [];

// (a) prose: the text of real completions (ordinary ids only), repeated to 1 MiB
{
  const DATA = fileURLToPath(new URL("../../../bench/data/mix-200k.txt", import.meta.url));
  const { offsets, bytes } = enc.table;
  const parts: Uint8Array[] = [];
  for (const line of readFileSync(DATA, "utf8").split("\n")) {
    for (const t of line.split(" ")) {
      const id = Number(t);
      if (t !== "" && id < 199998) parts.push(bytes.subarray(offsets[id]!, offsets[id + 1]!));
      else if (t !== "") parts.push(new Uint8Array([0x0a]));
    }
  }
  const once = Buffer.concat(parts).toString("utf8");
  let prose = once;
  while (Buffer.byteLength(prose) < MiB) prose += once;
  prose = prose.slice(0, MiB);
  if (!same(ours(prose), tiktoken(prose))) throw new Error("prose: ids differ");
  // interleave the two so drift (turbo, other load) hits both alike
  const t: number[] = [];
  const o: number[] = [];
  for (let r = 0; r < opts.runs; r++) {
    t.push(time(tiktoken, prose, 3, 200));
    o.push(time(ours, prose, 3, 200));
  }
  const bytesLen = Buffer.byteLength(prose);
  rows.push({
    case: "(a) prose, 1 MiB",
    bytes: bytesLen,
    tiktokenMs: median(t),
    oursMs: median(o),
    note: "",
  });
}

// (b) one long word
const perWord = new Map<number, number>();
{
  let last: [number, number] | undefined; // (chars, ms) of the last tiktoken run
  for (const n of [10_000, 20_000, 40_000, 120_000]) {
    const word = "abcdefghij".repeat(n / 10);
    const oursMs = time(ours, word, opts.runs, 20);
    let tiktokenMs: number | null = null;
    let note = "";
    const predicted = last ? last[1] * (n / last[0]) ** 2 : 0;
    if (predicted < opts.maxMs) {
      const t0 = performance.now();
      const want = tiktoken(word);
      const ms = performance.now() - t0;
      if (!same(ours(word), want)) throw new Error(`word of ${n}: ids differ`);
      tiktokenMs = ms < 2_000 ? time(tiktoken, word, opts.runs, 0) : ms;
      if (ms >= 2_000) note = "tiktoken: one run";
      last = [n, tiktokenMs];
      perWord.set(n, tiktokenMs);
    } else note = `tiktoken skipped (≈ ${(predicted / 1000).toFixed(0)} s extrapolated)`;
    if (!perWord.has(n) && last) perWord.set(n, predicted);
    rows.push({ case: `(b) one word, ${n / 1000}k chars`, bytes: n, tiktokenMs, oursMs, note });
  }
}

// (c) a 4 MiB request of long words
{
  const shapes: [string, string, number][] = [
    ["120k-char words", "abcdefghij".repeat(12_000), 120_000],
    ["300-byte words", "Xyzzy".repeat(60), 300],
  ];
  for (const [name, word, n] of shapes) {
    const count = Math.floor((4 * MiB) / (word.length + 1));
    const text = Array.from({ length: count }, () => word).join(" ");
    const oursMs = time(ours, text, Math.min(opts.runs, 3), 0);
    let tiktokenMs: number;
    let note: string;
    if (n === 300) {
      tiktokenMs = time(tiktoken, text, Math.min(opts.runs, 3), 0);
      if (!same(ours(text), tiktoken(text))) throw new Error(`${name}: ids differ`);
      note = "measured";
    } else {
      const [c0, ms0] = [...perWord.entries()].filter(([, ms]) => ms > 0).pop()!;
      tiktokenMs = count * ms0 * (n / c0) ** 2;
      note = `tiktoken extrapolated: ${count} × one ${n / 1000}k word`;
    }
    rows.push({ case: `(c) 4 MiB of ${name}`, bytes: Buffer.byteLength(text), tiktokenMs, oursMs, note });
  }
}

// (d) one piece of n bytes
const pieces: { bytes: number; tiktokenUs: number; heapUs: number }[] = [];
{
  for (const n of [64, 128, 192, 256, 384, 512, 1024]) {
    const piece = Array.from({ length: n }, (_, i) => String.fromCharCode(97 + ((i * 7919) % 26))).join("");
    const many = Array.from({ length: Math.ceil(50_000 / n) }, () => piece).join(" ");
    const k = many.split(" ").length;
    pieces.push({ bytes: n, tiktokenUs: (time(tiktoken, many) / k) * 1000, heapUs: (time(ours, many) / k) * 1000 });
  }
}

// (e) short messages, one call each
{
  const messages = [
    "What is the weather in Paris today?",
    "Checking Paris now.",
    '{"city":"Paris","unit":"celsius"}',
    "東京の天気を教えてください。",
    "Here is a short answer with an emoji ☀️ and a list:\n- one\n- two",
    "def add(a, b):\n    return a + b\n",
  ];
  const all = (f: (t: string) => unknown) => () => {
    for (let i = 0; i < 1000; i++) f(messages[i % messages.length]!);
  };
  for (const m of messages) if (!same(ours(m), tiktoken(m))) throw new Error(`message ${JSON.stringify(m)}: ids differ`);
  const t: number[] = [];
  const o: number[] = [];
  for (let r = 0; r < opts.runs; r++) {
    t.push(time(all(tiktoken), "", 3, 100));
    o.push(time(all(ours), "", 3, 100));
  }
  const bytes = messages.reduce((n, m) => n + Buffer.byteLength(m), 0);
  rows.push({
    case: "(e) 1,000 short messages, a call each",
    bytes: Math.round((bytes * 1000) / messages.length),
    tiktokenMs: median(t),
    oursMs: median(o),
    note: "",
  });
}

if (opts.json) {
  console.log(JSON.stringify({ rows, pieces, node: process.version, cpu: os.cpus()[0]?.model }, null, 2));
} else {
  const f = (ms: number | null) => (ms === null ? "—" : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(ms < 10 ? 2 : 1)} ms`);
  console.log(`BPE bench — node ${process.version}, ${os.cpus()[0]?.model ?? "?"}, median of ${opts.runs}\n`);
  console.log("| case | bytes | tiktoken | encodeOrdinary | ratio | note |\n|---|---:|---:|---:|---:|---|");
  for (const r of rows) {
    const ratio = r.tiktokenMs === null ? "—" : `${(r.oursMs / r.tiktokenMs).toFixed(r.oursMs / r.tiktokenMs < 0.01 ? 5 : 3)}`;
    console.log(`| ${r.case} | ${r.bytes.toLocaleString("en")} | ${f(r.tiktokenMs)} | ${f(r.oursMs)} | ${ratio} | ${r.note} |`);
  }
  console.log("\n| one piece, bytes | tiktoken µs | encodeOrdinary µs |\n|---:|---:|---:|");
  for (const p of pieces) console.log(`| ${p.bytes} | ${p.tiktokenUs.toFixed(1)} | ${p.heapUs.toFixed(1)} |`);
}
