/**
 * The service bench's run (see ../service-bench.ts for what it measures and
 * how to run it): check the flags, build the frames, run the service's
 * workloads, the echo baselines and the memory check, then report.
 */
import { execSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { opts } from "./flags.js";
import { traceLines } from "./figures.js";
import { clientGc } from "./gc.js";
import { echoPhase } from "./phase-echo.js";
import { memoryPhase } from "./phase-memory.js";
import { servicePhase } from "./phase-service.js";
import { printReport } from "./report.js";
import type { Bench } from "./state.js";
import { buildFrames, loadModules, loadWorkload } from "./workload.js";

export async function main(): Promise<void> {
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
