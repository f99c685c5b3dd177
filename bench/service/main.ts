/**
 * End-to-end service benchmark over loopback WebSocket (protobuf frames),
 * with a plain `ws` echo server as the transport baseline, in one run.
 * Prints a Markdown report (and JSON with --json).
 *
 *   node dist/bench/service/main.js [--seconds 2] [--runs 5] [--json]
 *       [--only abcde] [--windows 2,4,8] [--rate N] [--cpu-prof DIR]
 *       [--trace FILE] [--server-flags "--trace-gc-nvp"] [--handles]
 *       [--child-cpus LIST] [--child-output DIR] [--sched]
 *   With --server-flags "--trace-gc-nvp" the report sums up the service's
 *   GCs while (d) ran: scavenges, their pauses, what each copied and promoted.
 *   `taskset -c 0 node dist/bench/service/main.js --child-cpus 1` keeps the
 *   client on one CPU and the servers on the other, so that neither's GC or
 *   bursts take the other's core (on a 2-core machine they otherwise do).
 *
 * Setup: the service runs in a child process (`node dist/src/cli.js serve
 * --port 0 --grpc-port -1 --workers N`), the echo server in another child
 * (this file, `--child echo`), the client in this process. All of them share
 * the machine's cores, which the report states.
 *
 * Workloads (bench/data/mix-200k.txt, completions primed as assistant):
 * (a) step frames: S streams x 1 token per frame; each lane loops over its
 *     share of the completions (round robin), closing a used-up stream and
 *     opening the next in the same frame; a window of W unanswered frames;
 *     the max tokens/s over the windows tried.
 * (b) one stream, one content token per frame (each answered by one delta):
 *     sequential (window 1) and pipelined (window W); frames/s and the
 *     round-trip time of each frame.
 * (c) echo baseline: the same encoded client frames echoed back.
 * (d) (a) paced open loop at --load (default 50%) of the best frames/s of
 *     (a), or at --rate: round-trip time per frame; echo at the same pace,
 *     and a busy echo, whose main thread spends as much CPU per frame as
 *     the service's did in (d) (echoing, then spinning CPU time for the
 *     rest: as busy as the service, without parsing). For each
 *     paced figure, the frames over 2 ms and what they overlapped: GC pauses
 *     of the client and (with --trace-gc-nvp) the service, and with --sched
 *     (`perf sched`) the main threads' waits for a CPU and what ran instead.
 * (e) service RSS per open stream with 10k open streams; a leak check.
 *
 * The client does no protobuf work while timing: (a) frames are composed by
 * concatenating ops encoded beforehand (a ClientFrame is a repeated field),
 * (b) frames are a pre-encoded ring. Which frames get an answer frame (a
 * frame that produces no event gets none) is known beforehand: every op was
 * replayed through a local parser when it was encoded, and the warm-up runs
 * decode the answers and check their event counts against that replay.
 * Every throughput is the median of --runs timed runs of --seconds each,
 * after a warm-up; latency percentiles are over all timed runs of a figure
 * (HDR histograms, microsecond resolution).
 *
 * This file is the entry point and the run, step by step; beside it:
 * flags.ts, workload.ts and frames.ts (the frames), client.ts (the load
 * generator), children.ts and echo.ts (the service and echo children; the
 * echo child is this file with `--child echo`), figures.ts (timed runs, slow
 * frames), gc.ts, sched.ts, probes.ts and profiles.ts (what is measured
 * beside the round trips), phase-service.ts, phase-echo.ts and
 * phase-memory.ts (the workloads), and report.ts. thread.ts is the service's
 * main thread alone, in process.
 */
import { execSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { runEchoChild } from "./echo.js";
import { opts } from "./flags.js";
import { traceLines } from "./figures.js";
import { clientGc } from "./gc.js";
import { echoPhase } from "./phase-echo.js";
import { memoryPhase } from "./phase-memory.js";
import { servicePhase } from "./phase-service.js";
import { printReport } from "./report.js";
import type { Bench } from "./state.js";
import { buildFrames, loadModules, loadWorkload } from "./workload.js";

if (opts.child === "echo") runEchoChild();
else await main();

async function main(): Promise<void> {
  const mods = await loadModules();
  checkFlags();
  setClientHeapGrowth();
  const only = selectedWorkloads();
  const t0 = performance.now();
  const w = loadWorkload(mods);
  const frames = buildFrames(w, t0);
  const gc = compactHeap();
  const b: Bench = {
    w,
    frames,
    only,
    windows: opts.windows.split(",").map(Number),
    gc,
    results: {},
    layout: "not started",
    dRate: 0,
    dCpuUs: 0,
  };
  if (only.has("a") || only.has("b") || only.has("d")) await servicePhase(b);
  if (only.has("c")) await echoPhase(b);
  if (only.has("e")) b.results.e_memory = await memoryPhase(b);
  writeTrace();
  printReport(b, t0);
}

function checkFlags(): void {
  if (opts.childCpus) {
    try {
      execSync("taskset -V", { stdio: "ignore" });
    } catch {
      throw new Error("--child-cpus needs taskset (util-linux) on the PATH");
    }
  }
  if (!Number.isInteger(opts.runs) || opts.runs < 1) throw new Error("--runs must be an integer ≥ 1");
  if (!Number.isInteger(opts.clientHeapGrowth) || opts.clientHeapGrowth < 0) throw new Error("--client-heap-growth must be an integer ≥ 0");
}

/**
 * The client has the service's problem: with V8's own growing factor its
 * old generation had less headroom than its young generation, so it kept
 * marking (12-21 mark-compacts in (d)) on helper threads that share its
 * CPU with the thread that sends and reads. Setting it lowered the
 * paced p99 of every server it measures (bench/RESULTS.md).
 */
function setClientHeapGrowth(): void {
  if (opts.clientHeapGrowth > 0) setFlagsFromString(`--heap-growing-percent=${opts.clientHeapGrowth}`);
}

/** --only; (d) paces at a share of the max of (a), so it brings (a) unless --rate. */
function selectedWorkloads(): Set<string> {
  const only = new Set(opts.only.split(""));
  if (only.has("d") && opts.rate === undefined) only.add("a");
  return only;
}

/** Start timing with a compact client heap (the replay left garbage behind); returns a full GC, for (e). */
function compactHeap(): () => void {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  gc();
  return gc;
}

/** --trace: the paced frames' rows, then the client's own GC pauses, on the same clock as the frames' send times. */
function writeTrace(): void {
  if (!opts.trace) return;
  for (const g of clientGc) traceLines.push(`client_gc,${g.kind},${g.at.toFixed(3)},${g.ms.toFixed(3)}`);
  writeFileSync(opts.trace, traceLines.join("\n") + "\n");
}
