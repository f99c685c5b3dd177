/**
 * In-process parser throughput on bench/data/mix-200k.txt (633 gpt-oss
 * completions, 200,071 tokens), with a baseline loop over the same ids in
 * the same run. Prints a Markdown report (and JSON with --json).
 *
 *   node dist/bench/parser/main.js [--runs 7] [--json]
 *   node dist/bench/parser/main.js --compare ../base/dist/src/core/parser.js
 *
 * Every figure is the median of `runs` timed runs after a warm-up; each run
 * repeats its workload until it has taken at least `--min-ms` milliseconds.
 *
 * `--compare <path>` loads another build's parser (its `core/parser.js`, or a
 * checkout whose build is in `dist/`) and runs it and this build's
 * alternately on the same workloads, printing for each the ratio this / that
 * (the median of the runs' ratios, rates in CPU time): how a change to the
 * parser moves its speed, measured in one noisy run rather than across two.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import os from "node:os";
import { fileURLToPath, pathToFileURL } from "node:url";
import { PassThrough, Readable } from "node:stream";
import { Command } from "commander";
import { runParse } from "../../src/commands/parse.js";
import { HarmonyParser, type ParserOptions } from "../../src/core/parser.js";
import { FLAG_WHOLE, Vocabulary } from "../../src/core/vocab.js";
import { loadHarmonyEncoding } from "../../src/vocab/index.js";
import { loadReferencePeer } from "../peers/reference-wasm.js";

const opts = new Command()
  .option("--runs <n>", "timed runs per figure (median reported)", (v) => Number(v), 7)
  .option("--min-ms <n>", "minimum duration of one run", (v) => Number(v), 300)
  .option("--json", "print JSON instead of Markdown", false)
  .option("--compare <path>", "another build's core/parser.js (or its checkout): ratios of this build's speed to its")
  .option("--only <text>", "with --compare: only the workloads whose name holds this text")
  .parse()
  .opts<{ runs: number; minMs: number; json: boolean; compare?: string; only?: string }>();

const DATA = fileURLToPath(new URL("../../../bench/data/mix-200k.txt", import.meta.url));

// ---------------------------------------------------------------- start-up
const rssBefore = process.memoryUsage().rss;
const t0 = performance.now();
const enc = loadHarmonyEncoding({ shared: true });
const vocab = new Vocabulary(enc.table);
const startupMs = performance.now() - t0;
const rssAfter = process.memoryUsage().rss;
const tableBytes = enc.table.bytes.byteLength + enc.table.offsets.byteLength + enc.table.flags.byteLength;

const lines = readFileSync(DATA, "utf8")
  .trim()
  .split("\n")
  .map((l) => Uint32Array.from(l.trim().split(/\s+/).map(Number)));
const completions = lines.map((l) => l.subarray(2)); // primed: drop <|start|>assistant
const allIds = Uint32Array.from(lines.flatMap((l) => Array.from(l)));
const completionTokens = completions.reduce((a, l) => a + l.length, 0);

// ---------------------------------------------------------------- timing
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Tokens per second of `work` (which returns the tokens it processed). */
function measure(work: () => number): { mtoks: number; runs: number[] } {
  for (let i = 0; i < 2; i++) work(); // warm-up
  const rates: number[] = [];
  for (let r = 0; r < opts.runs; r++) {
    let tokens = 0;
    const start = performance.now();
    let elapsed = 0;
    do {
      tokens += work();
      elapsed = performance.now() - start;
    } while (elapsed < opts.minMs);
    rates.push(tokens / elapsed / 1000);
  }
  return { mtoks: median(rates), runs: rates };
}

let sink = 0;

/** A parser class: this build's, or the one `--compare` loads. */
type ParserClass = typeof HarmonyParser;

function perLineWhole(options: ParserOptions, P: ParserClass = HarmonyParser): number {
  for (const ids of completions) {
    const p = new P(vocab, options);
    sink += p.write(ids).length + p.end().length;
  }
  return completionTokens;
}

function perLinePerToken(options: ParserOptions, P: ParserClass = HarmonyParser): number {
  const one = new Uint32Array(1);
  for (const ids of completions) {
    const p = new P(vocab, options);
    for (let i = 0; i < ids.length; i++) {
      one[0] = ids[i]!;
      sink += p.write(one).length;
    }
    sink += p.end().length;
  }
  return completionTokens;
}

function wholeFile(options: ParserOptions, P: ParserClass = HarmonyParser): number {
  // the 633 completions one after another, each with its <|start|>assistant: parsed on past each
  // closing stop, as a conversation is (a stream that begins with the assistant's message is
  // otherwise one completion, which rule 8 ends at its first closing stop)
  const p = new P(vocab, { ...options, role: null, afterStop: "parse" });
  sink += p.write(allIds).length + p.end().length;
  return allIds.length;
}

/** Baseline: the per-token table lookup alone (string of each text token). */
function baseline(): number {
  const flags = vocab.flags;
  let n = 0;
  for (const ids of completions) {
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (id < 199998 && (flags[id]! & FLAG_WHOLE) !== 0) n += vocab.text(id).length;
    }
  }
  sink += n;
  return completionTokens;
}

/** ns per token for `n` content tokens in one message, fed `step` at a time. */
function longMessage(n: number, step: number): number {
  const content: number[] = [];
  for (const ids of completions) {
    for (const id of ids) if (id < 199998 && (vocab.flags[id]! & FLAG_WHOLE) !== 0) content.push(id);
    if (content.length >= n) break;
  }
  const stream = Uint32Array.from([...enc.encode("<|channel|>final<|message|>"), ...content.slice(0, n)]);
  const { mtoks } = measure(() => {
    const p = new HarmonyParser(vocab);
    for (let i = 0; i < stream.length; i += step) sink += p.write(stream.subarray(i, i + step)).length;
    sink += p.end().length;
    return stream.length;
  });
  return 1000 / mtoks;
}

// ---------------------------------------------------------------- --compare

/** The parser module at `where`: a built core/parser.js, or a checkout (its dist/src/core/parser.js). */
async function loadParser(where: string): Promise<ParserClass> {
  let file = path.resolve(where);
  if (existsSync(file) && statSync(file).isDirectory()) file = path.join(file, "dist/src/core/parser.js");
  const mod = (await import(pathToFileURL(file).href)) as { HarmonyParser?: ParserClass };
  if (typeof mod.HarmonyParser !== "function") throw new Error(`bug: ${file} exports no HarmonyParser`);
  return mod.HarmonyParser;
}

/**
 * This build's speed over the other's on `work`, run alternately (a run of
 * each, `runs` times, after a warm-up of both): the median of the runs'
 * ratios, with each side's median rate.
 */
function compareOn(
  work: (P: ParserClass) => number,
  other: ParserClass,
): { ratio: number; ratios: number[]; mtoks: number; other_mtoks: number } {
  // CPU time, not wall time: on a shared machine a run is descheduled at random, and
  // what is compared is the work each parser does
  const cpuMs = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  const once = (P: ParserClass): number => {
    let tokens = 0;
    const start = cpuMs();
    let elapsed = 0;
    do {
      tokens += work(P);
      elapsed = cpuMs() - start;
    } while (elapsed < opts.minMs);
    return tokens / elapsed / 1000;
  };
  for (let i = 0; i < 2; i++) {
    work(other);
    work(HarmonyParser);
  }
  const ratios: number[] = [];
  const mine: number[] = [];
  const theirs: number[] = [];
  for (let r = 0; r < opts.runs; r++) {
    // who goes first alternates, so neither always runs in the other's wake
    const a = r % 2 === 0 ? once(other) : 0;
    const b = once(HarmonyParser);
    const c = r % 2 === 0 ? a : once(other);
    mine.push(b);
    theirs.push(c);
    ratios.push(b / c);
  }
  return { ratio: median(ratios), ratios, mtoks: median(mine), other_mtoks: median(theirs) };
}

if (opts.compare !== undefined) {
  const other = await loadParser(opts.compare);
  const resilient: ParserOptions = {};
  const strict: ParserOptions = { mode: "strict" };
  const workloads: [string, (P: ParserClass) => number][] = [
    ["(a) whole completion per write, resilient", (P) => perLineWhole(resilient, P)],
    ["(a) whole completion per write, strict", (P) => perLineWhole(strict, P)],
    ["(a) whole file as one unprimed stream, resilient", (P) => wholeFile(resilient, P)],
    ["(b) one token per write, resilient", (P) => perLinePerToken(resilient, P)],
    ["(b) one token per write, strict", (P) => perLinePerToken(strict, P)],
  ];
  const rows = workloads
    .filter(([name]) => opts.only === undefined || name.includes(opts.only))
    .map(([name, work]) => ({ name, ...compareOn(work, other) }));
  if (opts.json) console.log(JSON.stringify({ compare: opts.compare, runs: opts.runs, rows }, null, 2));
  else {
    console.log(`This build against ${opts.compare}, run alternately (median of ${opts.runs} runs each)

| workload | this M tokens/s | that M tokens/s | this / that (median of ratios) |
|---|---|---|---|
${rows.map((r) => `| ${r.name} | ${r.mtoks.toFixed(2)} | ${r.other_mtoks.toFixed(2)} | ${r.ratio.toFixed(3)} |`).join("\n")}`);
  }
  if (sink === 0.5) console.log("");
  process.exit(0);
}

// the reference parser, when its WASM build can be loaded
let peer: { name: string; mtoks: number; messages: number } | { name: string; error: string };
try {
  const ref = await loadReferencePeer();
  let messages = 0;
  const m = measure(() => {
    messages = ref.parseCompletions(completions);
    return completionTokens;
  });
  peer = { name: ref.name, mtoks: m.mtoks, messages };
} catch (e) {
  peer = { name: "openai-harmony (WASM reference)", error: (e as Error).message };
}

/** `parse --batch` in process: JSON Lines in, JSON Lines out, cases per second. */
async function batchCasesPerSecond(strictMode: boolean): Promise<number> {
  const fixtures = fileURLToPath(new URL("../../../test/fixtures/conformance/", import.meta.url));
  const input = ["wellformed.jsonl", "malformed.jsonl"]
    .map((f) => readFileSync(fixtures + f, "utf8").trim())
    .join("\n")
    .split("\n")
    .map((l) => {
      const c = JSON.parse(l) as { id: string; tokens: number[]; role: string | null };
      return JSON.stringify({ id: c.id, tokens: c.tokens, role: c.role });
    });
  const rates: number[] = [];
  for (let r = 0; r < opts.runs + 1; r++) {
    const out = new PassThrough();
    out.resume();
    const start = performance.now();
    await runParse(
      { input: "ids", role: "assistant", strict: strictMode, nonStrict: false, output: "messages", batch: true },
      { stdin: Readable.from([input.join("\n")]), stdout: out, stderr: new PassThrough() },
      enc,
    );
    if (r > 0) rates.push(input.length / ((performance.now() - start) / 1000));
  }
  return median(rates);
}
const batch = { strict: await batchCasesPerSecond(true), resilient: await batchCasesPerSecond(false) };

const resilient: ParserOptions = {};
const strict: ParserOptions = { mode: "strict" };
const results = {
  machine: {
    cpu: os.cpus()[0]?.model ?? "unknown",
    cores: os.cpus().length,
    memory_gib: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
  },
  data: { completions: completions.length, completion_tokens: completionTokens, file_tokens: allIds.length },
  startup: { ms: startupMs, table_bytes: tableBytes, rss_delta_bytes: rssAfter - rssBefore },
  baseline_lookup: measure(baseline),
  a_whole_resilient: measure(() => perLineWhole(resilient)),
  a_whole_strict: measure(() => perLineWhole(strict)),
  a_file_resilient: measure(() => wholeFile(resilient)),
  b_per_token_resilient: measure(() => perLinePerToken(resilient)),
  b_per_token_strict: measure(() => perLinePerToken(strict)),
  peer_reference: peer,
  batch_cases_per_second: batch,
  long_message: {
    ns_1k: longMessage(1000, 1),
    ns_16k: longMessage(16000, 1),
    ns_1k_whole: longMessage(1000, 1 << 20),
    ns_16k_whole: longMessage(16000, 1 << 20),
  },
};

if (opts.json) {
  console.log(JSON.stringify(results, null, 2));
} else {
  const f = (x: number) => x.toFixed(2);
  const r = results;
  const lm = r.long_message;
  const peerRate = "mtoks" in r.peer_reference ? r.peer_reference.mtoks : 0;
  const rows: [string, number][] = [
    ["baseline: per-token table lookup only", r.baseline_lookup.mtoks],
    [
      "mtoks" in r.peer_reference
        ? `peer: ${r.peer_reference.name}, fresh parser per completion, process() per token`
        : `peer unavailable: ${r.peer_reference.error}`,
      peerRate,
    ],
    ["(a) whole completion per write, resilient", r.a_whole_resilient.mtoks],
    ["(a) whole completion per write, strict", r.a_whole_strict.mtoks],
    ["(a) whole file as one unprimed stream, resilient", r.a_file_resilient.mtoks],
    ["(b) one token per write, resilient", r.b_per_token_resilient.mtoks],
    ["(b) one token per write, strict", r.b_per_token_strict.mtoks],
  ];
  console.log(`Machine: ${r.machine.cpu}, ${r.machine.cores} cores, ${r.machine.memory_gib} GiB; Node ${r.machine.node}; ${r.machine.platform}
Data: ${r.data.completions} completions, ${r.data.completion_tokens} completion tokens (${r.data.file_tokens} as one stream)
Start-up (vocabulary table from tiktoken WASM): ${r.startup.ms.toFixed(0)} ms, table ${(r.startup.table_bytes / 2 ** 20).toFixed(2)} MiB (SharedArrayBuffer), RSS +${(r.startup.rss_delta_bytes / 2 ** 20).toFixed(0)} MiB

| workload | M tokens/s (median of ${opts.runs}) | × baseline | × peer |
|---|---|---|---|
${rows.map(([name, m]) => `| ${name} | ${f(m)} | ${f(m / r.baseline_lookup.mtoks)} | ${peerRate > 0 ? f(m / peerRate) : "–"} |`).join("\n")}

\`parse --batch\` on the 606 conformance cases (JSON Lines in and out, in process): ${r.batch_cases_per_second.strict.toFixed(0)} cases/s strict, ${r.batch_cases_per_second.resilient.toFixed(0)} cases/s resilient.

| one message of N content tokens | ns/token at 1k | ns/token at 16k | 16k / 1k |
|---|---|---|---|
| one token per write | ${lm.ns_1k.toFixed(1)} | ${lm.ns_16k.toFixed(1)} | ${(lm.ns_16k / lm.ns_1k).toFixed(2)} |
| one write | ${lm.ns_1k_whole.toFixed(1)} | ${lm.ns_16k_whole.toFixed(1)} | ${(lm.ns_16k_whole / lm.ns_1k_whole).toFixed(2)} |`);
}
if (sink === 0.5) console.log(""); // keep the work observable
