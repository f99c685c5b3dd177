/**
 * Start-up, and `parse --batch` end to end, against another build in the
 * same run (its checkout's dist/, e.g. a worktree of an earlier commit),
 * runs alternated so that drift hits both alike:
 *   (a) `parse --input text` of one line: process start to exit;
 *   (b) `serve` to its first /readyz 200 (polled every 5 ms);
 *   (c) a new parser worker's first task: the pool made, one task run on the
 *       worker, answered (in process, each build's own pool);
 *   (d) `parse --batch` of ~2M tokens (bench/data/mix-200k.txt's completions,
 *       repeated): wall time, and tokens/s with (e) subtracted;
 *   (e) `parse --batch` of nothing: the start-up (d) includes;
 *   (f) the vocabulary: read from the table file (this build) beside the
 *       table built from tiktoken, as every start did before the file.
 * Every figure is the median of `--runs` runs.
 *
 *   node dist/bench/startup/main.js [--runs 7] [--baseline /path/to/checkout] [--json]
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Command } from "commander";
import { HARMONY } from "../../src/core/preset.js";
import { loadHarmonyEncoding } from "../../src/vocab/index.js";
import { buildFromTiktoken } from "../../src/vocab/tiktoken.js";

const opts = new Command()
  .option("--runs <n>", "runs per figure (median reported)", (v) => Number(v), 7)
  .option("--baseline <dir>", "another checkout, built (its dist/src/cli.js), measured in the same run")
  .option("--json", "print JSON instead of Markdown", false)
  .parse()
  .opts<{ runs: number; baseline?: string; json: boolean }>();

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const builds: { name: string; dir: string }[] = [{ name: "this build", dir: ROOT }];
if (opts.baseline) {
  const dir = path.resolve(opts.baseline);
  if (!existsSync(path.join(dir, "dist/src/cli.js"))) throw new Error(`${dir}: no dist/src/cli.js (build it first)`);
  builds.push({ name: "baseline", dir });
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

/** Wall ms of `node <cli> args` with `input` on stdin, to its exit. */
function runCli(dir: string, args: string[], input: string | Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [path.join(dir, "dist/src/cli.js"), ...args], { stdio: ["pipe", "ignore", "inherit"] });
    child.once("error", reject);
    child.once("exit", (code) => (code === 0 ? resolve(performance.now() - t0) : reject(new Error(`${args.join(" ")} exited ${code}`))));
    child.stdin.end(input);
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** ms from spawning `serve` to its first /readyz 200. */
async function serveReady(dir: string): Promise<number> {
  const port = await freePort();
  const t0 = performance.now();
  const child = spawn(process.execPath, [path.join(dir, "dist/src/cli.js"), "serve", "--port", String(port), "--grpc-port", "-1"], {
    stdio: "ignore",
  });
  try {
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) return performance.now() - t0;
      if (child.exitCode !== null) throw new Error(`serve exited ${child.exitCode}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  } finally {
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
  }
}

/** ms from making a pool of one worker (the build's own) to its first task's answer. */
async function workerFirstTask(dir: string): Promise<number> {
  const { loadHarmonyEncoding: load } = (await import(
    pathToFileURL(path.join(dir, "dist/src/vocab/index.js")).href
  )) as typeof import("../../src/vocab/index.js");
  const { ParserPool } = (await import(
    pathToFileURL(path.join(dir, "dist/src/pool/pool.js")).href
  )) as typeof import("../../src/pool/pool.js");
  const { schema } = (await import(
    pathToFileURL(path.join(dir, "dist/src/protocol/schema.js")).href
  )) as typeof import("../../src/protocol/schema.js");
  const table = load({ shared: true }).table;
  const t0 = performance.now();
  const pool = new ParserPool({ workers: 1, inline: 0, table, schema: schema() });
  await pool.drop(0, 1); // a task the worker answers once its module is loaded
  const ms = performance.now() - t0;
  await pool.close();
  return ms;
}

// (d)'s input: every completion of the bench file (primed: its first two ids dropped), repeated to ~2M tokens
const dir = mkdtempSync(path.join(os.tmpdir(), "startup-bench-"));
const batchFile = path.join(dir, "batch.jsonl");
let batchTokens = 0;
{
  const lines = readFileSync(path.join(ROOT, "bench/data/mix-200k.txt"), "utf8").split("\n").filter(Boolean);
  const out: string[] = [];
  for (let k = 0; batchTokens < 2_000_000; k++) {
    const ids = lines[k % lines.length]!.split(" ").map(Number).slice(2);
    out.push(JSON.stringify({ id: `c${k}`, tokens: ids }));
    batchTokens += ids.length;
  }
  writeFileSync(batchFile, out.join("\n") + "\n");
}
const batch = readFileSync(batchFile);
const ONE_LINE = "<|channel|>final<|message|>Hi<|return|>\n";

type Figures = { parse: number[]; serve: number[]; worker: number[]; batch: number[]; empty: number[] };
const figures = new Map<string, Figures>(builds.map((b) => [b.name, { parse: [], serve: [], worker: [], batch: [], empty: [] }]));
for (let r = 0; r < opts.runs; r++) {
  for (const b of r % 2 === 0 ? builds : [...builds].reverse()) {
    const f = figures.get(b.name)!;
    f.parse.push(await runCli(b.dir, ["parse", "--input", "text"], ONE_LINE));
    f.serve.push(await serveReady(b.dir));
    f.batch.push(await runCli(b.dir, ["parse", "--batch"], batch));
    f.empty.push(await runCli(b.dir, ["parse", "--batch"], ""));
  }
}
// one pool per process per build: the first pool of a process pays its module loading, as a new worker does
for (const b of builds) figures.get(b.name)!.worker.push(await workerFirstTask(b.dir));
for (let r = 1; r < opts.runs; r++) for (const b of builds) figures.get(b.name)!.worker.push(await workerFirstTask(b.dir));

const table: number[] = [];
const built: number[] = [];
for (let r = 0; r < Math.min(opts.runs, 3); r++) {
  table.push(loadHarmonyEncoding().loadMs);
  const t0 = performance.now();
  buildFromTiktoken(HARMONY, false);
  built.push(performance.now() - t0);
}
rmSync(dir, { recursive: true, force: true });

const rows = builds.map((b) => {
  const f = figures.get(b.name)!;
  const batchMs = median(f.batch);
  const emptyMs = median(f.empty);
  return {
    build: b.name,
    dir: b.dir,
    parseMs: median(f.parse),
    serveReadyMs: median(f.serve),
    workerFirstTaskMs: median(f.worker),
    batchMs,
    emptyBatchMs: emptyMs,
    batchTokensPerS: batchTokens / ((batchMs - emptyMs) / 1000),
    batchTokensPerSWithStart: batchTokens / (batchMs / 1000),
  };
});
const vocab = { tableFileMs: median(table), tiktokenBuildMs: median(built) };

if (opts.json) {
  console.log(
    JSON.stringify(
      { rows, vocab, batchTokens, runs: opts.runs, node: process.version, cpu: os.cpus()[0]?.model, load: os.loadavg() },
      null,
      2,
    ),
  );
} else {
  const ms = (x: number) => `${x.toFixed(0)} ms`;
  console.log(
    `Start-up bench — node ${process.version}, ${os.cpus()[0]?.model ?? "?"}, median of ${opts.runs}, load ${os.loadavg()[0]!.toFixed(1)}\n`,
  );
  console.log(`| figure | ${rows.map((r) => r.build).join(" | ")} |${rows.length > 1 ? " ratio |" : ""}`);
  console.log(`|---|${rows.map(() => "---:").join("|")}|${rows.length > 1 ? "---:|" : ""}`);
  const line = (name: string, f: (r: (typeof rows)[number]) => number, fmt: (x: number) => string) => {
    const v = rows.map(f);
    console.log(`| ${name} | ${v.map(fmt).join(" | ")} |${v.length > 1 ? ` ${(v[0]! / v[1]!).toFixed(3)} |` : ""}`);
  };
  line("(a) parse --input text, one line", (r) => r.parseMs, ms);
  line("(b) serve to /readyz 200", (r) => r.serveReadyMs, ms);
  line("(c) a new worker's first task", (r) => r.workerFirstTaskMs, ms);
  line(`(d) parse --batch, ${(batchTokens / 1e6).toFixed(2)}M tokens`, (r) => r.batchMs, ms);
  line("(e) parse --batch of nothing", (r) => r.emptyBatchMs, ms);
  line(
    "(d) − (e): M tokens/s",
    (r) => r.batchTokensPerS / 1e6,
    (x) => x.toFixed(2),
  );
  line(
    "(d) with start-up: M tokens/s",
    (r) => r.batchTokensPerSWithStart / 1e6,
    (x) => x.toFixed(2),
  );
  console.log(`\n(f) vocabulary: table file read in ${ms(vocab.tableFileMs)}; built from tiktoken in ${ms(vocab.tiktokenBuildMs)}`);
}
