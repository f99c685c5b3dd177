/**
 * Figures: a warm-up run, then --runs timed runs of --seconds each, summed
 * up as medians (throughput, CPU) and percentiles over all timed runs
 * (latency); for paced figures, which frames were slow and what they
 * overlapped. Also the --trace rows the runs leave behind.
 */
import os from "node:os";
import path from "node:path";
import { constants as perfConstants } from "node:perf_hooks";
import { run, Trace, type RunResult, type RunSpec } from "./client.js";
import { opts } from "./flags.js";
import { clientGc, clientGcSpans, type Span } from "./gc.js";
import { schedWaits, startSched } from "./sched.js";
import { lat, median, newHist, type Lat } from "./stats.js";

/**
 * --trace rows. Frames: phase (service, echo), timed run, send time, round
 * trip. GC pauses: client_gc (kind as perf_hooks numbers it: 1 minor, 4
 * major, 8 incremental, 16 weak callbacks; at = the pause's start; over the
 * whole bench) and service_gc (s or mc; at = when its --trace-gc-nvp line
 * arrived, just after the pause; during (d) only). Times are this process's
 * performance.now(), ms.
 */
export const traceLines: string[] = ["phase,run_or_kind,at_ms,ms"];

export interface Figure {
  runs: RunResult[];
  tokens_per_s: number;
  frames_per_s: number;
  latency: Lat;
  latency_sched?: Lat;
  server_cpu: number;
  server_main_cpu: number;
  client_cpu: number;
  max_inflight: number;
  mismatches: string[];
  /** this process's GC pauses during the timed runs */
  client_gc: { count: number; major: number; total_ms: number; max_ms: number };
}

function figure(runs: RunResult[]): Figure {
  const all = newHist();
  const sched = newHist();
  for (const r of runs) {
    all.add(r.hist);
    if (r.histSched) sched.add(r.histSched);
  }
  return {
    runs,
    tokens_per_s: median(runs.map((r) => r.tokens / (r.ms / 1000))),
    frames_per_s: median(runs.map((r) => r.frames / (r.ms / 1000))),
    latency: lat(all),
    latency_sched: runs[0]?.histSched ? lat(sched) : undefined,
    server_cpu: median(runs.map((r) => r.serverCpu)),
    server_main_cpu: median(runs.map((r) => r.serverMainCpu)),
    client_cpu: median(runs.map((r) => r.clientCpu)),
    max_inflight: Math.max(...runs.map((r) => r.maxInflight)),
    client_gc: (() => {
      const gcs = clientGc.filter((g) => runs.some((r) => g.at >= r.t0 && g.at <= r.t1));
      const pauses = gcs.map((g) => g.ms);
      return {
        count: pauses.length,
        major: gcs.filter((g) => g.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR).length,
        total_ms: pauses.reduce((a, b) => a + b, 0),
        max_ms: Math.max(0, ...pauses),
      };
    })(),
    mismatches: runs.flatMap((r) => r.mismatches),
  };
}

/** A warm-up run (answers verified when `verify`), then `runs` timed runs. */
export async function measure(
  base: Omit<RunSpec, "ms" | "verify">,
  verify: boolean,
  traceName?: string,
): Promise<Figure & { warmup_mismatches: string[] }> {
  const w = await run({ ...base, ms: opts.warmup * 1000, verify });
  const runs: RunResult[] = [];
  for (let i = 0; i < opts.runs; i++) {
    // paced runs keep every frame's send time and latency, to tell what the slow ones overlapped
    const trace = base.rate !== undefined ? new Trace(Math.ceil(base.rate * opts.seconds * 1.1)) : undefined;
    const r = await run({ ...base, ms: opts.seconds * 1000, trace });
    r.trace = trace;
    runs.push(r);
    if (trace && traceName && opts.trace)
      for (let j = 0; j < trace.n; j++) traceLines.push(`${traceName},${i},${trace.sent(j).toFixed(3)},${trace.ms(j).toFixed(3)}`);
  }
  return { ...figure(runs), warmup_mismatches: w.mismatches };
}

/**
 * What the slow frames of a paced figure overlapped: frames whose round
 * trip took over `thr` ms, by whether a GC pause of this process, one of
 * the server's (when known), or a wait for a CPU of either process's main
 * thread (`--sched`) fell inside their round trip.
 */
function slowFrames(runs: RunResult[], sources: { name: string; spans: Span[] }[], thr = 2) {
  const by: Record<string, number> = {};
  for (const s of sources) by[s.name] = 0;
  let frames = 0;
  let over = 0;
  let none = 0;
  let clusters = 0;
  for (const s of sources) s.spans.sort((x, y) => x.a - y.a);
  for (const r of runs) {
    const tr = r.trace;
    if (!tr) continue;
    let prevSlow = -Infinity;
    for (let j = 0; j < tr.n; j++) {
      frames++;
      const t = tr.sent(j);
      const rtt = tr.ms(j);
      if (rtt <= thr) continue;
      over++;
      if (t - prevSlow > 5) clusters++;
      prevSlow = t;
      let any = false;
      for (const s of sources) {
        // spans are few (tens per run): a scan is cheap enough for the slow frames
        if (s.spans.some((g) => g.a < t + rtt && g.b > t)) {
          by[s.name]!++;
          any = true;
        }
      }
      if (!any) none++;
    }
  }
  return {
    threshold_ms: thr,
    frames,
    over,
    over_pct: frames === 0 ? 0 : (100 * over) / frames,
    clusters,
    overlapping: by,
    overlapping_none: none,
  };
}

/**
 * A paced figure (`base.rate`, `base.serverPid`): its runs, with the
 * scheduler recorded under --sched, and what its slow frames overlapped.
 * `afterRuns` reads what must be read right after the timed runs (before
 * perf's parsing blocks this thread for seconds) and returns the server's
 * GC pauses.
 */
export async function pacedFigure(
  base: Omit<RunSpec, "ms" | "verify">,
  traceName: string,
  serverName: string,
  afterRuns?: () => Promise<Span[]>,
) {
  const pid = base.serverPid!;
  const sched = opts.sched ? startSched(path.join(os.tmpdir(), `service-bench-${process.pid}-${traceName}.sched`)) : null;
  let fig: Awaited<ReturnType<typeof measure>>;
  try {
    fig = await measure(base, false, traceName);
  } catch (e) {
    await sched?.stop();
    throw e;
  }
  const timed = { from: fig.runs[0]!.t0, to: fig.runs[fig.runs.length - 1]!.t1 };
  const gcSpans = afterRuns ? await afterRuns() : [];
  const sr = sched ? await sched.stop() : null;
  const names = new Map([
    [pid, serverName],
    [process.pid, "the client"],
  ]);
  const waits = sr
    ? { server: schedWaits(sr, pid, timed.from, timed.to, names), client: schedWaits(sr, process.pid, timed.from, timed.to, names) }
    : null;
  const slow = slowFrames(fig.runs, [
    { name: "client_gc", spans: clientGcSpans() },
    ...(gcSpans.length > 0 ? [{ name: "server_gc", spans: gcSpans }] : []),
    ...(waits
      ? [
          { name: "server_waited_for_cpu", spans: waits.server.spans },
          { name: "client_waited_for_cpu", spans: waits.client.spans },
        ]
      : []),
  ]);
  return { fig, slow, sched: waits ? { server: waits.server.summary, client: waits.client.summary } : undefined };
}

/** Drop per-run raw data (histograms) from a figure for the report. */
export function strip(f: Figure): SFig;
export function strip(f: Record<string, Figure>): Record<string, SFig>;
export function strip(f: Figure | Record<string, Figure>): SFig | Record<string, SFig> {
  const one = (x: Figure): SFig => {
    const { runs, ...rest } = x;
    return {
      ...rest,
      runs_tokens_per_s: runs.map((r) => Math.round(r.tokens / (r.ms / 1000))),
      runs_frames_per_s: runs.map((r) => Math.round(r.frames / (r.ms / 1000))),
    };
  };
  if ("runs" in f && Array.isArray(f.runs)) return one(f as Figure);
  return Object.fromEntries(Object.entries(f as Record<string, Figure>).map(([k, v]) => [k, one(v)]));
}

/** A paced figure: what its slow frames overlapped and, with --sched, how long the main threads waited for a CPU. */
export type PacedFig = SFig & {
  frames_per_s_target: number;
  slow: ReturnType<typeof slowFrames>;
  sched?: { server: ReturnType<typeof schedWaits>["summary"]; client: ReturnType<typeof schedWaits>["summary"] };
};
/** A figure as reported: its runs reduced to their throughputs. */
export type SFig = Omit<Figure, "runs"> & {
  runs_tokens_per_s: number[];
  runs_frames_per_s: number[];
  window?: number;
  warmup_mismatches?: string[];
};
