/**
 * The report: the machine and the setup, every figure, and the figures
 * against the targets, as Markdown (or JSON with --json; --json-file also
 * writes the JSON).
 */
import { execSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import { fileURLToPath } from "node:url";
import type { LaneSource, Ring } from "./frames.js";
import type { PacedFig, SFig } from "./figures.js";
import { opts } from "./flags.js";
import type { GcSummary } from "./gc.js";
import { frameServiceUs, type frameTimeShares } from "./probes.js";
import type { summariseProfiles } from "./profiles.js";
import type { Bench } from "./state.js";

/** Print the report (and write it with --json-file); `t0` is when the bench began building its frames. */
export function printReport(b: Bench, t0: number): void {
  const machine = machineInfo();
  const setup = setupInfo(b.layout, t0);
  const report = { machine, setup, data: { completions: b.w.completions.length, completion_tokens: b.w.completionTokens }, ...b.results };
  const jsonText = JSON.stringify(
    report,
    (_k, v: unknown) => (typeof v === "number" && !Number.isInteger(v) ? Number(v.toPrecision(6)) : v),
    2,
  );
  if (opts.jsonFile) writeFileSync(opts.jsonFile, jsonText + "\n");
  if (opts.json) {
    console.log(jsonText);
  } else {
    console.log(markdown(report as unknown as Report));
  }
}

function machineInfo() {
  return {
    cpu: os.cpus()[0]?.model ?? "unknown",
    cores: os.cpus().length,
    memory_gib: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
    loadavg_at_end: os.loadavg().map((x) => Number(x.toFixed(2))),
  };
}

function setupInfo(layout: string, t0: number) {
  return {
    service: `child process: node dist/src/cli.js serve${opts.workers === undefined ? "" : ` --workers ${opts.workers}`}${opts.serveFlags ? ` ${opts.serveFlags}` : ""} (${layout})`,
    echo: "child process: ws WebSocketServer echoing every message",
    client: `this process: one raw ws client per run, pre-encoded frames; (a), (b), (d) streams named by ${opts.handles ? "numeric handle (Open.handle)" : "name"}; V8 heap growth ${opts.clientHeapGrowth > 0 ? `${opts.clientHeapGrowth}%` : "V8's own"}`,
    client_heap_growth: opts.clientHeapGrowth,
    handles: opts.handles,
    commit: gitState(),
    /** CPUs the children and this client may run on (Cpus_allowed_list), when the children are pinned */
    cpus: opts.childCpus ? { children: opts.childCpus, client: cpusAllowed() } : null,
    runs: opts.runs,
    seconds: opts.seconds,
    warmup_seconds: opts.warmup,
    server_warmup_seconds: opts.serverWarmup,
    total_seconds: Number(((performance.now() - t0) / 1000).toFixed(1)),
  };
}

export interface Report {
  machine: { cpu: string; cores: number; memory_gib: number; node: string; platform: string; loadavg_at_end: number[] };
  setup: {
    service: string;
    commit: string;
    handles: boolean;
    client_heap_growth: number;
    cpus: { children: string; client: string } | null;
    runs: number;
    seconds: number;
    warmup_seconds: number;
    total_seconds: number;
  };
  data: { completions: number; completion_tokens: number };
  a_step_frames?: {
    streams: number;
    frames: ReturnType<LaneSource["stats"]> & { compose_us_per_frame: number };
    best_window: number;
    windows: Record<string, SFig>;
  };
  b_single_stream?: { ring: ReturnType<Ring["stats"]>; sequential: SFig; pipelined: SFig };
  c_echo?: {
    step_frames?: SFig;
    single_sequential?: SFig;
    single_pipelined?: SFig;
    step_frames_paced?: PacedFig;
    step_frames_paced_busy?: PacedFig & { work_us: number };
  };
  d_paced?: PacedFig & {
    load: number;
    tokens_per_s_target: number;
    service_gc?: GcSummary;
    service_frame_time: ReturnType<typeof frameTimeShares>;
    service_rss_bytes: number;
  };
  e_memory?: {
    streams: number;
    tokens_per_stream: number;
    per_frame: number;
    rss_baseline_bytes: number;
    rss_points: { streams: number; rss_bytes: number }[];
    rss_full_bytes: number;
    rss_after_close_bytes: number;
    rss_after_more_cycles_bytes: number[];
    bytes_per_stream: number;
    bytes_per_stream_slope: number;
    open_streams_metric_full?: number;
    open_streams_metric_after_close?: number;
    in_process_bytes_per_stream: number;
    in_process_heap_bytes_per_stream: number;
    in_process_bytes_after_close: number;
    mismatches: string[];
  };
  service_checks?: { metrics_after_all_connections_closed: Record<string, number>; warn_log_lines: number };
  cpu_profiles?: ReturnType<typeof summariseProfiles>;
}

const k = (x: number) => (x >= 1e6 ? `${(x / 1e6).toFixed(2)}M` : x >= 1e4 ? `${(x / 1e3).toFixed(0)}k` : x.toFixed(0));
const ms = (x: number | undefined) => (x === undefined ? "–" : x < 1 ? x.toFixed(3) : x.toFixed(2));
const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
const cpu = (f: SFig) => `${pct(f.server_cpu)} (main ${pct(f.server_main_cpu)}) / ${pct(f.client_cpu)}`;
const met = (ok: boolean) => (ok ? "met" : "**not met**");

/** The report as Markdown: the setup, the figures' table, notes on each, the targets, the checks, the profiles. */
export function markdown(r: Report): string {
  const L: string[] = [];
  header(r, L);
  table(r, L);
  notes(r, L);
  memory(r, L);
  targets(r, L);
  checks(r, L);
  profiles(r, L);
  return L.join("\n");
}

function header(r: Report, L: string[]): void {
  const m = r.machine;
  L.push(
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memory_gib} GiB; Node ${m.node}; ${m.platform}; load average at end ${m.loadavg_at_end.join(" ")}`,
  );
  const where = r.setup.cpus
    ? `the service and the echo server pinned to CPU ${r.setup.cpus.children} (taskset), the client allowed CPU ${r.setup.cpus.client}`
    : `all on the same ${m.cores} cores`;
  L.push(
    `Setup: ${r.setup.service}, built from ${r.setup.commit}; echo server and client in their own processes, ${where}, loopback. Streams in (a), (b), (d) named by ${r.setup.handles ? "numeric handle" : "name"}. The client's V8 heap growth: ${r.setup.client_heap_growth > 0 ? `${r.setup.client_heap_growth}%` : "V8's own"}.`,
  );
  L.push(
    `Medians of ${r.setup.runs} timed runs of ${r.setup.seconds} s after ${r.setup.warmup_seconds} s of warm-up; latency percentiles over all timed runs. Total ${r.setup.total_seconds} s.`,
  );
  L.push(`Data: ${r.data.completions} completions, ${r.data.completion_tokens} tokens (primed).`);
  L.push("");
}

/** One row per figure. */
function table(r: Report, L: string[]): void {
  L.push("| workload | tokens/s | frames/s | RTT p50 ms | RTT p99 ms | CPU server (main) / client |");
  L.push("|---|---|---|---|---|---|");
  const row = (name: string, f: SFig | undefined, tokens = true) => {
    if (!f) return;
    L.push(
      `| ${name} | ${tokens ? k(f.tokens_per_s) : "–"} | ${k(f.frames_per_s)} | ${ms(f.latency.p50_ms)} | ${ms(f.latency.p99_ms)} | ${cpu(f)} |`,
    );
  };
  const a = r.a_step_frames;
  if (a)
    for (const [w, f] of Object.entries(a.windows))
      row(`(a) ${a.streams} streams × 1 token/frame, window ${w}${Number(w) === a.best_window ? " (best)" : ""}`, f);
  const b = r.b_single_stream;
  if (b) {
    row("(b) 1 stream × 1 token/frame, sequential", b.sequential);
    row(`(b) 1 stream × 1 token/frame, pipelined (window ${b.pipelined.window})`, b.pipelined);
  }
  const c = r.c_echo;
  if (c) {
    row(`(c) echo, (a) frames, window ${c.step_frames?.window ?? ""}`, c.step_frames, false);
    row("(c) echo, (b) frames, sequential", c.single_sequential, false);
    row(`(c) echo, (b) frames, pipelined (window ${c.single_pipelined?.window ?? ""})`, c.single_pipelined, false);
  }
  const d = r.d_paced;
  if (d) {
    row(`(d) (a) paced at ${Number.isNaN(d.load) ? "" : `${pct(d.load)} of max: `}${k(d.frames_per_s_target)} frames/s`, d);
    row(`(c) echo, (a) frames paced at the same rate`, c?.step_frames_paced, false);
    const busy = c?.step_frames_paced_busy;
    if (busy) row(`(c) echo spinning ${busy.work_us} µs of CPU per frame (as busy as the service in (d)), same rate`, busy, false);
  }
  L.push("");
}

/** What each figure's frames were, and (d)'s CPU, GCs, own time per frame and slow frames. */
function notes(r: Report, L: string[]): void {
  const a = r.a_step_frames;
  const b = r.b_single_stream;
  const c = r.c_echo;
  const d = r.d_paced;
  if (a)
    L.push(
      `(a) frames: ${a.frames.lanes} lanes, each looping over its own completions (periods ${a.frames.lane_period_steps.min}–${a.frames.lane_period_steps.max} steps); ${a.frames.mean_frame_bytes} bytes per frame on average, ${a.frames.answered_pct.toFixed(1)}% of frames answered; composing a frame from pre-encoded ops costs the client ${a.frames.compose_us_per_frame.toFixed(1)} µs.`,
    );
  if (b) L.push(`(b) ring: ${b.ring.frames} frames (${b.ring.mean_frame_bytes} bytes on average), every one answered with one event.`);
  if (d && a) {
    const best = a.windows[String(a.best_window)]!;
    const per = (f: SFig, x: number) => ((1000 * x) / f.frames_per_s).toFixed(2);
    L.push(
      `(d) service CPU per frame: ${per(d, d.server_cpu)} ms (main thread ${per(d, d.server_main_cpu)} ms) paced, against ${per(best, best.server_cpu)} ms (${per(best, best.server_main_cpu)} ms) at the max of (a); client GC pauses during (d): ${d.client_gc.count} (${d.client_gc.major} major), longest ${d.client_gc.max_ms.toFixed(1)} ms.`,
    );
  }
  const gc = d?.service_gc;
  if (gc) {
    L.push(
      `(d) service GCs (--trace-gc-nvp, warm-ups included): ${gc.scavenges} scavenges, pause p50 ${gc.scavenge_pause_ms.p50.toFixed(1)} ms, max ${gc.scavenge_pause_ms.max.toFixed(1)} ms, ${gc.survived_kb.toFixed(0)} KiB alive and ${gc.promoted_kb.toFixed(0)} KiB promoted per scavenge on average; ${gc.mark_compacts} mark-compacts${gc.mark_compacts === 0 ? "" : `, pause p50 ${gc.mark_compact_pause_ms.p50.toFixed(1)} ms, max ${gc.mark_compact_pause_ms.max.toFixed(1)} ms`}.`,
    );
  }
  if (d) {
    const ft = d.service_frame_time;
    L.push(
      `(d) the service's own time per frame (harmony_frame_latency_seconds, a frame read to its answer handed to the socket; warm-up included, ${ft.frames} frames): ${ft.within.map((x) => `${x.pct.toFixed(2)}% within ${x.ms} ms`).join(", ")}. Service RSS right after (d): ${(d.service_rss_bytes / 2 ** 20).toFixed(0)} MiB.`,
    );
  }
  pacedNotes(L, "(d)", "service", d);
  pacedNotes(L, "(c) echo paced:", "echo server", c?.step_frames_paced);
  pacedNotes(L, `(c) busy echo paced:`, "echo server", c?.step_frames_paced_busy);
  if (d?.latency_sched)
    L.push(
      `(d) latency from each frame's scheduled send time (coordinated omission corrected): p50 ${ms(d.latency_sched.p50_ms)} ms, p99 ${ms(d.latency_sched.p99_ms)} ms, max ${ms(d.latency_sched.max_ms)} ms; most frames in flight ${d.max_inflight}.`,
    );
}

/** What a paced figure's slow frames overlapped, and the main threads' waits for a CPU (--sched). */
function pacedNotes(L: string[], name: string, server: string, f: PacedFig | undefined): void {
  if (!f) return;
  const sl = f.slow;
  const o = sl.overlapping;
  const parts = [`a GC pause of the client ${o.client_gc ?? 0}`];
  if (o.server_gc !== undefined) parts.push(`of the ${server} ${o.server_gc}`);
  if (o.server_waited_for_cpu !== undefined)
    parts.push(
      `a wait for a CPU of the ${server}'s main thread ${o.server_waited_for_cpu}`,
      `of the client's ${o.client_waited_for_cpu ?? 0}`,
    );
  L.push(
    `${name} frames over ${sl.threshold_ms} ms: ${sl.over} of ${sl.frames} (${sl.over_pct.toFixed(2)}%) in ${sl.clusters} clusters; overlapping ${parts.join(", ")}; none of these ${sl.overlapping_none}.`,
  );
  const w = f.sched;
  if (w) {
    const one = (x: NonNullable<PacedFig["sched"]>["server"]) =>
      `${x.waits} waits over ${x.waits_over_ms} ms (${x.waits_over_2ms} over 2 ms, longest ${x.max_wait_ms.toFixed(1)} ms, ${x.total_wait_ms.toFixed(0)} ms in all) in ${x.switch_ins} switch-ins; on its CPU meanwhile: ${
        Object.entries(x.ran_instead_ms)
          .map(([t, v]) => `${t} ${v.toFixed(1)} ms`)
          .join(", ") || "nothing recorded"
      }`;
    L.push(
      `${name} scheduling (perf sched, timed runs): the ${server}'s main thread ${one(w.server)}. The client's main thread ${one(w.client)}.`,
    );
  }
}

/** (e): the service's RSS as the streams opened and after, and what the in-process service held. */
function memory(r: Report, L: string[]): void {
  const e = r.e_memory;
  if (e) {
    const mib = (x: number) => (x / 2 ** 20).toFixed(1);
    L.push("");
    L.push(
      `(e) ${e.streams} open streams (opened ${e.tokens_per_stream} tokens deep, ${e.per_frame} per frame), service RSS (VmRSS, all threads): ${e.rss_points.map((p) => `${mib(p.rss_bytes)} MiB at ${p.streams}`).join(", ")} open streams → ${mib(e.rss_after_close_bytes)} MiB after the connection closed${e.rss_after_more_cycles_bytes.length === 0 ? "" : `; after ${e.rss_after_more_cycles_bytes.length} more cycles of opening ${e.streams} streams on a new connection and disconnecting: ${e.rss_after_more_cycles_bytes.map(mib).join(" MiB, ")} MiB`}.`,
    );
    L.push(
      `By the service process's RSS: ${(e.bytes_per_stream / 1024).toFixed(2)} KiB per open stream (least-squares slope over the ${e.rss_points.length} samples: ${(e.bytes_per_stream_slope / 1024).toFixed(2)} KiB; RSS also moves with garbage not yet collected and heap pages returned, so it is a rough figure). The same streams on a service in the bench's own process (no worker threads), heap and external memory after forced GCs: **${(e.in_process_bytes_per_stream / 1024).toFixed(2)} KiB per open stream** (JS heap ${(e.in_process_heap_bytes_per_stream / 1024).toFixed(2)} KiB), and once the connection closed, ${(e.in_process_bytes_after_close / 2 ** 20).toFixed(2)} MiB held compared with before it opened (a second cycle of ${e.streams} streams, after a first one filled the process's caches). harmony_open_streams: ${e.open_streams_metric_full} open, ${e.open_streams_metric_after_close} after close.`,
    );
  }
}

/** The four targets: (a) tokens/s, (b) against the echo, the paced p99, memory per open stream. */
function targets(r: Report, L: string[]): void {
  const a = r.a_step_frames;
  const b = r.b_single_stream;
  const c = r.c_echo;
  const d = r.d_paced;
  const e = r.e_memory;
  L.push("");
  L.push("### Against the targets");
  L.push("");
  L.push("| target | measured | |");
  L.push("|---|---|---|");
  if (a) {
    const best = a.windows[String(a.best_window)]!;
    L.push(`| (a) ≥ 2M tokens/s | ${k(best.tokens_per_s)} tokens/s (window ${a.best_window}) | ${met(best.tokens_per_s >= 2e6)} |`);
  }
  if (b && c?.single_sequential && c.single_pipelined) {
    const rs = b.sequential.frames_per_s / c.single_sequential.frames_per_s;
    const rp = b.pipelined.frames_per_s / c.single_pipelined.frames_per_s;
    L.push(`| (b) ≥ 80% of echo frames/s | sequential ${pct(rs)}, pipelined ${pct(rp)} | ${met(rs >= 0.8)} / ${met(rp >= 0.8)} |`);
  }
  if (d)
    L.push(
      `| p99 < 2 ms at ${Number.isNaN(d.load) ? `${k(d.frames_per_s_target)} frames/s` : `${pct(d.load)} of max load`} | p99 ${ms(d.latency.p99_ms)} ms (p50 ${ms(d.latency.p50_ms)} ms) | ${met(d.latency.p99_ms < 2)} |`,
    );
  if (e) {
    L.push(
      `| ≤ 4 KB per open stream | ${(e.in_process_bytes_per_stream / 1000).toFixed(2)} KB held per stream (forced GC); ${(e.bytes_per_stream / 1000).toFixed(2)} KB by service RSS | ${met(e.in_process_bytes_per_stream <= 4000)} |`,
    );
  }
}

/** The warm-ups' answer checks, and the service's metrics and warnings after the runs. */
function checks(r: Report, L: string[]): void {
  const a = r.a_step_frames;
  const b = r.b_single_stream;
  const e = r.e_memory;
  const mism = [
    ...Object.values(a?.windows ?? {}).flatMap((f) => [
      ...f.mismatches,
      ...((f as { warmup_mismatches?: string[] }).warmup_mismatches ?? []),
    ]),
    ...(b ? [...b.sequential.mismatches, ...((b.sequential as { warmup_mismatches?: string[] }).warmup_mismatches ?? [])] : []),
    ...(e?.mismatches ?? []),
  ];
  L.push("");
  L.push(
    mism.length === 0
      ? "Answers checked in the warm-ups: every answer frame held the number of events the local replay predicts."
      : `Answer mismatches: ${mism.join("; ")}`,
  );
  if (r.service_checks) {
    const mt = r.service_checks.metrics_after_all_connections_closed;
    const errs = Object.entries(mt).filter(([key, v]) => key.startsWith("harmony_errors_total") && v > 0);
    L.push(
      `Service metrics after the runs: ${mt["harmony_tokens_total"]} tokens, ${Object.entries(mt)
        .filter(([key]) => key.startsWith("harmony_frames_total"))
        .map(([, v]) => v)
        .join(
          "",
        )} frames, open streams ${mt["harmony_open_streams"]}, connections ${mt['harmony_connections{transport="ws"}'] ?? 0}, errors ${errs.length === 0 ? "none" : errs.map(([key, v]) => `${key} ${v}`).join(", ")}; ${r.service_checks.warn_log_lines} warn log lines. Time from reading a frame to handing its answer to the socket, mean over all frames of every workload (harmony_frame_latency_seconds): ${frameServiceUs(mt)} µs.`,
    );
  }
}

/** --cpu-prof: each thread's busy time by function. */
function profiles(r: Report, L: string[]): void {
  if (r.cpu_profiles) {
    L.push("");
    L.push("### CPU profiles of the service child (all its phases, start-up excluded)");
    for (const p of r.cpu_profiles) {
      L.push("");
      L.push(
        `${p.thread} (${p.file}): ${p.sampled_ms.toFixed(0)} ms sampled after start-up, ${p.idle_pct.toFixed(0)}% idle. Inclusive, % of busy: ${p.inclusive.map((x) => `${x.fn} ${x.pct.toFixed(0)}%`).join(", ")}.`,
      );
      L.push("");
      L.push("| self % of busy | function |");
      L.push("|---|---|");
      for (const t of p.top_self) L.push(`| ${t.pct.toFixed(1)} | \`${t.fn}\` |`);
    }
  }
}

/** The commit the build came from (the service is measured as built). */
function gitState(): string {
  if (process.env.BENCH_COMMIT) return process.env.BENCH_COMMIT;
  try {
    const cwd = fileURLToPath(new URL("../../..", import.meta.url));
    return execSync("git describe --always --dirty", { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return "unknown";
  }
}

/** The CPUs this process may run on (Linux: Cpus_allowed_list), or "all". */
function cpusAllowed(): string {
  try {
    return /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync("/proc/self/status", "utf8"))?.[1] ?? "all";
  } catch {
    return "all";
  }
}
