/**
 * End-to-end service benchmark over loopback WebSocket (protobuf frames),
 * with a plain `ws` echo server as the transport baseline, in one run.
 * Prints a Markdown report (and JSON with --json).
 *
 *   node dist/bench/service-bench.js [--seconds 2] [--runs 5] [--json]
 *       [--only abcde] [--windows 2,4,8] [--rate N] [--cpu-prof DIR]
 *       [--trace FILE] [--server-flags "--trace-gc-nvp"] [--handles]
 *       [--child-cpus LIST] [--child-output DIR] [--sched]
 *   With --server-flags "--trace-gc-nvp" the report sums up the service's
 *   GCs while (d) ran: scavenges, their pauses, what each copied and promoted.
 *   `taskset -c 0 node dist/bench/service-bench.js --child-cpus 1` keeps the
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
 */
import { once } from "node:events";
import { execSync, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { constants as perfConstants, PerformanceObserver } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { Command } from "commander";
import { build as buildHistogram, type Histogram } from "hdr-histogram-js";
import WebSocket, { WebSocketServer } from "ws";

const opts = new Command()
  .option("--seconds <n>", "duration of one timed run, seconds", (v) => Number(v), 2)
  .option("--runs <n>", "timed runs per figure (median reported)", (v) => Number(v), 5)
  .option("--warmup <n>", "warm-up seconds before each figure", (v) => Number(v), 1)
  .option("--server-warmup <n>", "seconds of (a) and (b) traffic after a service starts, before any figure", (v) => Number(v), 4)
  .option("--workers <n>", "service worker threads (default: the service's own default)", (v) => Number(v))
  .option("--serve-flags <flags>", 'extra `serve` flags for the service child, space-separated (e.g. "--inline on")', "")
  .option("--streams <n>", "(a) streams per step frame", (v) => Number(v), 256)
  .option("--handles", "(a), (b), (d): name streams by numeric handle (Open.handle) instead of by name", false)
  .option("--windows <list>", "(a) windows of unanswered frames to try", "2,4,8")
  .option("--pipeline <n>", "(b) window of the pipelined single-stream run", (v) => Number(v), 8)
  .option("--load <f>", "(d) fraction of the max frames/s of (a)", (v) => Number(v), 0.5)
  .option("--rate <n>", "(d) frames/s to pace at, instead of --load × the max of (a)", (v) => Number(v))
  .option("--mem-streams <n>", "(e) open streams", (v) => Number(v), 10_000)
  .option("--mem-depth <n>", "(e) tokens fed to each stream before measuring (the window holds up to 512)", (v) => Number(v), 8)
  .option("--mem-cycles <n>", "(e) leak check: more cycles of open all, disconnect", (v) => Number(v), 2)
  .option("--only <letters>", "run a subset of a,b,c,d,e (d needs a, unless --rate)", "abcde")
  .option("--cpu-prof <dir>", "run the service child under node --cpu-prof, write profiles to DIR and summarise them")
  .option("--server-flags <flags>", "extra node flags for the service child, space-separated (e.g. --trace-gc)", "")
  .option(
    "--child-cpus <list>",
    "run the service and echo children on these CPUs only (taskset -c LIST); run the bench itself under taskset to keep the client off them",
  )
  .option(
    "--child-output <dir>",
    "write each child's output lines that are not JSON logs (such as --trace-gc lines under --server-flags), stamped with the client's clock, to DIR/<pid>.txt; the log says when (d) ran on that clock",
  )
  .option(
    "--trace <file>",
    "write every paced (d) frame's send time and latency to FILE (CSV), with the client's GC pauses and, under --trace-gc-nvp, the service's",
  )
  .option(
    "--sched",
    "record the scheduler with `perf sched` while (d) and its echo runs are paced (needs perf): how long the servers' and the client's main threads waited for a CPU, and what ran instead",
    false,
  )
  .option(
    "--client-heap-growth <percent>",
    "V8 --heap-growing-percent for this process, the client (0: V8's own); the service's is its own --heap-growth",
    (v) => Number(v),
    300,
  )
  .option("--json", "print JSON instead of Markdown", false)
  .option("--json-file <file>", "also write the JSON report to FILE")
  .option("--child <kind>", "(internal) run as the echo server child")
  .option("--echo-work-us <n>", "(internal) the echo child spins this many µs per frame before echoing it", (v) => Number(v), 0)
  .parse()
  .opts<{
    seconds: number;
    runs: number;
    warmup: number;
    serverWarmup: number;
    workers?: number;
    streams: number;
    handles: boolean;
    windows: string;
    pipeline: number;
    load: number;
    rate?: number;
    memStreams: number;
    memDepth: number;
    memCycles: number;
    only: string;
    cpuProf?: string;
    json: boolean;
    jsonFile?: string;
    trace?: string;
    childOutput?: string;
    childCpus?: string;
    serverFlags: string;
    serveFlags: string;
    child?: string;
    echoWorkUs: number;
    sched: boolean;
    clientHeapGrowth: number;
  }>();

const MAX_PAYLOAD = 64 * 1024 * 1024;

// ================================================================ helpers
/** The commit the build came from (the service is measured as built). */
function gitState(): string {
  if (process.env.BENCH_COMMIT) return process.env.BENCH_COMMIT;
  try {
    const cwd = fileURLToPath(new URL("../..", import.meta.url));
    return execSync("git describe --always --dirty", { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return "unknown";
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)]!;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function newHist(): Histogram {
  return buildHistogram({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
}

interface Lat {
  count: number;
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
  p999_ms: number;
  max_ms: number;
  mean_ms: number;
}

function lat(h: Histogram): Lat {
  const ms = (us: number) => us / 1000;
  return {
    count: h.totalCount,
    p50_ms: ms(h.getValueAtPercentile(50)),
    p90_ms: ms(h.getValueAtPercentile(90)),
    p99_ms: ms(h.getValueAtPercentile(99)),
    p999_ms: ms(h.getValueAtPercentile(99.9)),
    max_ms: ms(h.maxValue),
    mean_ms: ms(h.mean),
  };
}

// ---------------------------------------------------------------- /proc
const CLK_TCK = 100;

/** CPU seconds of a process (all threads) and of its main thread. */
function procCpu(pid: number): { total: number; main: number } {
  const read = (file: string) => {
    const f = readFileSync(file, "utf8");
    const rest = f.slice(f.lastIndexOf(")") + 2).split(" ");
    return (Number(rest[11]) + Number(rest[12])) / CLK_TCK; // utime + stime
  };
  try {
    return { total: read(`/proc/${pid}/stat`), main: read(`/proc/${pid}/task/${pid}/stat`) };
  } catch {
    return { total: NaN, main: NaN };
  }
}

function vmRssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : NaN;
}

// ---------------------------------------------------------------- children
interface Child {
  proc: ChildProcess;
  pid: number;
  port: number;
  /** log lines at warn level or above (the service only) */
  warnLines: string[];
  stderr: string[];
  /** stdout lines that are not JSON logs (e.g. --trace-gc), with the time they arrived */
  other: { at: number; line: string }[];
  /** the service's "serving" log record (workers, inline, …) */
  serving: Record<string, unknown>;
}

async function spawnChild(args: string[], nodeFlags: string[], readyMsg: string): Promise<Child> {
  // taskset execs node in place, so the pid stays the service's own
  const cmd = opts.childCpus ? ["taskset", "-c", opts.childCpus, process.execPath] : [process.execPath];
  const proc = spawn(cmd[0]!, [...cmd.slice(1), ...nodeFlags, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  const child: Child = { proc, pid: proc.pid!, port: 0, warnLines: [], stderr: [], other: [], serving: {} };
  createInterface({ input: proc.stderr! }).on("line", (l) => child.stderr.push(l));
  const lines = createInterface({ input: proc.stdout! });
  child.port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`child did not start: ${child.stderr.join("\n")}`)), 60_000);
    proc.once("exit", (code) => reject(new Error(`child exited (${code}): ${child.stderr.join("\n")}`)));
    lines.on("line", (l) => {
      let rec: { msg?: string; port?: number; level?: number } = {};
      try {
        rec = JSON.parse(l) as typeof rec;
      } catch {
        if (child.other.length < 100_000) child.other.push({ at: performance.now(), line: l });
        return;
      }
      if (rec.msg === readyMsg && typeof rec.port === "number") {
        clearTimeout(timer);
        child.serving = rec;
        resolve(rec.port);
      } else if ((rec.level ?? 0) >= 40) child.warnLines.push(l);
    });
  });
  return child;
}

async function stopChild(c: Child): Promise<void> {
  if (opts.childOutput) {
    mkdirSync(opts.childOutput, { recursive: true });
    writeFileSync(path.join(opts.childOutput, `${c.pid}.txt`), c.other.map((o) => `${o.at.toFixed(1)} ${o.line}\n`).join(""));
  }
  if (c.proc.exitCode !== null) return;
  const exited = once(c.proc, "exit");
  c.proc.kill("SIGTERM");
  const t = setTimeout(() => c.proc.kill("SIGKILL"), 15_000);
  await exited;
  clearTimeout(t);
}

const CLI = fileURLToPath(new URL("../src/cli.js", import.meta.url));

function startService(workers: number | undefined, profDir?: string): Promise<Child> {
  const flags = [...opts.serverFlags.split(" ").filter(Boolean), ...(profDir ? ["--cpu-prof", "--cpu-prof-dir", profDir] : [])];
  // --log-level info: at warn the "serving" line (the only place the port of
  // --port 0 appears) is not printed
  const args = [
    CLI,
    "serve",
    "--host",
    "127.0.0.1",
    "--port",
    "0",
    "--grpc-port",
    "-1",
    ...(workers === undefined ? [] : ["--workers", String(workers)]),
    "--log-level",
    "info",
    ...opts.serveFlags.split(" ").filter(Boolean),
  ];
  return spawnChild(args, flags, "harmony-sidecar serving");
}

/** The echo server; with `workUs`, it spins that long per frame before echoing it (a server as busy as the service, minus the parsing). */
function startEcho(workUs = 0): Promise<Child> {
  return spawnChild([fileURLToPath(import.meta.url), "--child", "echo", "--echo-work-us", String(workUs)], [], "echo serving");
}

async function connect(port: number): Promise<WebSocket> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/stream`, { perMessageDeflate: false, maxPayload: MAX_PAYLOAD });
  await once(ws, "open");
  return ws;
}

async function closeWs(ws: WebSocket): Promise<void> {
  if (ws.readyState === WebSocket.CLOSED) return;
  const closed = once(ws, "close");
  ws.close(1000, "bench done");
  await Promise.race([closed, sleep(3000)]);
}

async function fetchMetrics(port: number): Promise<Record<string, number>> {
  const text = await new Promise<string>((resolve, reject) => {
    http
      .get(`http://127.0.0.1:${port}/metrics`, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (body += d));
        res.on("end", () => resolve(body));
      })
      .on("error", reject);
  });
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || !line.startsWith("harmony_") || line.startsWith("harmony_process_")) continue;
    const i = line.lastIndexOf(" ");
    const key = line.slice(0, i);
    if (key.includes("_bucket") && !key.startsWith("harmony_frame_latency")) continue;
    out[key] = Number(line.slice(i + 1));
  }
  return out;
}

/** The CPUs this process may run on (Linux: Cpus_allowed_list), or "all". */
function cpusAllowed(): string {
  try {
    return /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync("/proc/self/status", "utf8"))?.[1] ?? "all";
  } catch {
    return "all";
  }
}

/** One GC of the service, from a `--trace-gc-nvp` line; `at` is when the line arrived (just after the pause). */
interface GcEvent {
  at: number;
  kind: "s" | "mc";
  pause: number;
  survived: number;
  promoted: number;
}

/** The service's scavenges and mark-compacts whose lines arrived in [from, to]. */
function gcEvents(lines: { at: number; line: string }[], from: number, to: number): GcEvent[] {
  const field = (line: string, name: string) => {
    const m = new RegExp(`(?:^|\\s)${name}=([0-9.]+)`).exec(line);
    return m ? Number(m[1]) : NaN;
  };
  const out: GcEvent[] = [];
  for (const { at, line } of lines) {
    if (at < from || at > to) continue;
    const kind = /(?:^|\s)gc=(s|mc)(?:\s|$)/.exec(line)?.[1] as GcEvent["kind"] | undefined;
    if (kind)
      out.push({ at, kind, pause: field(line, "pause"), survived: field(line, "new_space_survived"), promoted: field(line, "promoted") });
  }
  return out;
}

/** The service's GCs while (d) ran (none without --trace-gc-nvp). */
interface GcSummary {
  scavenges: number;
  scavenge_pause_ms: { p50: number; max: number };
  /** Mean bytes alive (copied) and promoted per scavenge. */
  survived_kb: number;
  promoted_kb: number;
  mark_compacts: number;
  mark_compact_pause_ms: { p50: number; max: number };
}

function summariseGc(events: GcEvent[]): GcSummary | undefined {
  const sc = events.filter((e) => e.kind === "s");
  const mc = events.filter((e) => e.kind === "mc").map((e) => e.pause);
  if (events.length === 0) return undefined;
  const p50 = (xs: number[]) => (xs.length === 0 ? 0 : [...xs].sort((x, y) => x - y)[xs.length >> 1]!);
  const max = (xs: number[]) => (xs.length === 0 ? 0 : Math.max(...xs));
  const mean = (xs: number[]) => (xs.length === 0 ? 0 : xs.reduce((x, y) => x + y, 0) / xs.length);
  return {
    scavenges: sc.length,
    scavenge_pause_ms: { p50: p50(sc.map((x) => x.pause)), max: max(sc.map((x) => x.pause)) },
    survived_kb: mean(sc.map((x) => x.survived)) / 1024,
    promoted_kb: mean(sc.map((x) => x.promoted)) / 1024,
    mark_compacts: mc.length,
    mark_compact_pause_ms: { p50: p50(mc), max: max(mc) },
  };
}

/**
 * The service's own time per frame (harmony_frame_latency_seconds: a frame
 * read to its answer handed to the socket) between two readings of its
 * metrics: the share of frames within each bucket's bound.
 */
function frameTimeShares(
  before: Record<string, number>,
  after: Record<string, number>,
): { frames: number; within: { ms: number; pct: number }[] } {
  const cum = new Map<number, number>();
  for (const [key, v] of Object.entries(after)) {
    const le = /^harmony_frame_latency_seconds_bucket\{.*le="([^"]+)"/.exec(key)?.[1];
    if (le === undefined) continue;
    const bound = le === "+Inf" ? Infinity : Number(le) * 1000;
    cum.set(bound, (cum.get(bound) ?? 0) + v - (before[key] ?? 0));
  }
  const frames = cum.get(Infinity) ?? 0;
  const within = [...cum.entries()]
    .filter(([b]) => b !== Infinity && b <= 10)
    .sort((x, y) => x[0] - y[0])
    .map(([ms, n]) => ({ ms, pct: frames === 0 ? 0 : (100 * n) / frames }));
  return { frames, within };
}

/** Mean of the service's frame latency histogram (read to answer handed to the socket), µs. */
function frameServiceUs(mt: Record<string, number>): string {
  const sum = Object.entries(mt).find(([k]) => k.startsWith("harmony_frame_latency_seconds_sum"))?.[1];
  const count = Object.entries(mt).find(([k]) => k.startsWith("harmony_frame_latency_seconds_count"))?.[1];
  return sum !== undefined && count ? ((sum / count) * 1e6).toFixed(1) : "n/a";
}

// ---------------------------------------------------------------- frame sources
/** Pre-encoded client frames by step number t = 0, 1, 2, ... */
interface Source {
  /** The frame of step t; sets `events` and `tokens` for it. */
  at(t: number): Buffer;
  /** events the last frame produces (local replay); 0: it gets no answer frame */
  events: number;
  tokens: number;
}

/** A fixed list of frames replayed in a loop (it must wrap cleanly). */
class Ring implements Source {
  events = 0;
  tokens = 0;
  constructor(
    readonly frames: Buffer[],
    readonly ev: Uint32Array,
    readonly tok: Uint32Array,
  ) {}
  at(t: number): Buffer {
    const i = t % this.frames.length;
    this.events = this.ev[i]!;
    this.tokens = this.tok[i]!;
    return this.frames[i]!;
  }
  stats() {
    const bytes = this.frames.reduce((a, b) => a + b.length, 0);
    return {
      frames: this.frames.length,
      mean_frame_bytes: Math.round(bytes / this.frames.length),
      answered_frames: this.ev.reduce((a, e) => a + (e > 0 ? 1 : 0), 0),
      tokens: this.tok.reduce((a, b) => a + b, 0),
    };
  }
}

/**
 * Step frames for many lanes, composed per step from pre-encoded per-lane
 * chunks (a ClientFrame is a repeated field, so encoded ops concatenate).
 * Lane l loops over its own completions forever: step s of its period P_l
 * carries [close previous, open next] at a completion boundary, then one
 * Tokens op with one id. Step 0 of the very first period has no close.
 */
class LaneSource implements Source {
  events = 0;
  tokens = 0;
  constructor(
    /** per lane: index of its first chunk, and its period in steps */
    readonly base: Uint32Array,
    readonly period: Uint32Array,
    /** all chunks back to back; chunk i is bytes[off[i], off[i+1]) */
    readonly bytes: Buffer,
    readonly off: Uint32Array,
    readonly ev: Uint32Array,
    /** chunk of step 0 of the first period, per lane (no close) */
    readonly first: Buffer[],
    readonly firstEv: Uint32Array,
  ) {
    this.idx = new Uint32Array(base.length);
  }
  private readonly idx: Uint32Array;
  at(t: number): Buffer {
    const lanes = this.base.length;
    let size = 0;
    let events = 0;
    if (t === 0) {
      const out = Buffer.concat(this.first);
      for (let l = 0; l < lanes; l++) events += this.firstEv[l]!;
      this.events = events;
      this.tokens = lanes;
      return out;
    }
    const idx = this.idx;
    for (let l = 0; l < lanes; l++) {
      const i = this.base[l]! + (t % this.period[l]!);
      idx[l] = i;
      size += this.off[i + 1]! - this.off[i]!;
      events += this.ev[i]!;
    }
    const out = Buffer.allocUnsafe(size);
    const bytes = this.bytes;
    let pos = 0;
    for (let l = 0; l < lanes; l++) {
      const i = idx[l]!;
      // chunks are ~15 bytes: a plain loop beats Buffer#copy's per-call cost
      for (let b = this.off[i]!, e = this.off[i + 1]!; b < e; b++) out[pos++] = bytes[b]!;
    }
    this.events = events;
    this.tokens = lanes;
    return out;
  }
  stats(sample = 2000) {
    let bytes = 0;
    let answered = 0;
    for (let t = 1; t <= sample; t++) {
      bytes += this.at(t).length;
      if (this.events > 0) answered++;
    }
    return {
      lanes: this.base.length,
      lane_period_steps: { min: Math.min(...this.period), max: Math.max(...this.period) },
      mean_frame_bytes: Math.round(bytes / sample),
      answered_pct: (100 * answered) / sample,
    };
  }
}

// ---------------------------------------------------------------- runners
interface RunResult {
  frames: number;
  answered: number;
  tokens: number;
  ms: number;
  hist: Histogram;
  /** paced runs: latency from the scheduled send time (coordinated omission corrected) */
  histSched?: Histogram;
  serverCpu: number;
  serverMainCpu: number;
  clientCpu: number;
  maxInflight: number;
  mismatches: string[];
  /** performance.now() at start and end, to find this process's GC pauses in the run */
  t0: number;
  t1: number;
  /** paced runs: send time and latency (ms) per answered frame */
  trace?: Trace;
}

/** Send times and latencies of a paced run's frames, in a buffer allocated before it starts (no growth while timing). */
class Trace {
  private buf: Float64Array;
  /** frames recorded */
  n = 0;
  constructor(frames: number) {
    this.buf = new Float64Array(2 * Math.max(1024, frames));
  }
  push(sent: number, ms: number): void {
    if (2 * this.n + 2 > this.buf.length) {
      const bigger = new Float64Array(2 * this.buf.length);
      bigger.set(this.buf);
      this.buf = bigger;
    }
    this.buf[2 * this.n] = sent;
    this.buf[2 * this.n + 1] = ms;
    this.n++;
  }
  sent(i: number): number {
    return this.buf[2 * i]!;
  }
  ms(i: number): number {
    return this.buf[2 * i + 1]!;
  }
}

interface Cursor {
  t: number;
}

interface RunSpec {
  ws: WebSocket;
  src: Source;
  cursor: Cursor;
  /** echo server: every frame is answered */
  answerAll?: boolean;
  /** window of unanswered frames (closed loop) */
  window?: number;
  /** frames per second (open loop, paced) */
  rate?: number;
  ms?: number;
  maxFrames?: number;
  serverPid?: number;
  /** decode answers and compare their event counts with the local replay */
  verify?: boolean;
  decode?: (b: Buffer) => number;
  /** collect performance.now() at send and latency ms per answered frame */
  trace?: Trace;
}

/**
 * Send ring frames from `cursor` and match answers (in order: an answer
 * belongs to the oldest unanswered frame that expects one). Stops sending at
 * the deadline (after a frame that expects an answer) and resolves when every
 * expected answer has arrived.
 */
function run(spec: RunSpec): Promise<RunResult> {
  const { ws, src, cursor } = spec;
  const answerAll = spec.answerAll === true;
  const cap = 1 << 16;
  const qT = new Float64Array(cap);
  const qS = new Float64Array(cap);
  const qE = new Uint32Array(cap);
  let head = 0;
  let count = 0;
  const hist = newHist();
  const histSched = spec.rate ? newHist() : undefined;
  const res: RunResult = {
    frames: 0,
    answered: 0,
    tokens: 0,
    ms: 0,
    hist,
    histSched,
    serverCpu: 0,
    serverMainCpu: 0,
    clientCpu: 0,
    maxInflight: 0,
    mismatches: [],
    t0: 0,
    t1: 0,
  };
  const cpu0 = spec.serverPid ? procCpu(spec.serverPid) : { total: 0, main: 0 };
  const ccpu0 = process.cpuUsage();
  const start = performance.now();
  const deadline = spec.ms !== undefined ? start + spec.ms : Infinity;
  const maxFrames = spec.maxFrames ?? Infinity;
  let stopping = false;
  let last = start;

  return new Promise<RunResult>((resolve, reject) => {
    const finish = () => {
      ws.off("message", onMessage);
      ws.off("close", onClose);
      res.ms = last - start;
      res.t0 = start;
      res.t1 = last;
      const cpu1 = spec.serverPid ? procCpu(spec.serverPid) : { total: 0, main: 0 };
      res.serverCpu = (cpu1.total - cpu0.total) / (res.ms / 1000);
      res.serverMainCpu = (cpu1.main - cpu0.main) / (res.ms / 1000);
      const cc = process.cpuUsage(ccpu0);
      res.clientCpu = (cc.user + cc.system) / 1000 / res.ms;
      resolve(res);
    };
    const onClose = (code: number, reason: Buffer) => reject(new Error(`connection closed: ${code} ${reason.toString()}`));
    /** send one frame; `sched` is its scheduled time (paced runs) */
    const sendOne = (sched: number) => {
      const buf = src.at(cursor.t++);
      const t = performance.now();
      ws.send(buf, { binary: true });
      res.frames++;
      res.tokens += src.tokens;
      if (answerAll || src.events > 0) {
        const at = (head + count) & (cap - 1);
        qT[at] = t;
        qS[at] = sched;
        qE[at] = src.events;
        count++;
        if (count > res.maxInflight) res.maxInflight = count;
        if (t >= deadline || res.frames >= maxFrames) stopping = true;
      }
      if (count >= cap - 1) throw new Error("too many frames in flight");
    };
    const onMessage = (data: Buffer) => {
      const now = performance.now();
      if (count === 0) {
        res.mismatches.push("an answer frame no frame was waiting for");
        return;
      }
      const t = qT[head]!;
      const s = qS[head]!;
      const want = qE[head]!;
      head = (head + 1) & (cap - 1);
      count--;
      res.answered++;
      last = now;
      hist.recordValue(Math.max(1, Math.round((now - t) * 1000)));
      if (spec.trace) spec.trace.push(t, now - t);
      if (histSched) histSched.recordValue(Math.max(1, Math.round((now - s) * 1000)));
      if (spec.verify && spec.decode) {
        const got = spec.decode(data);
        if (got !== want && res.mismatches.length < 10) res.mismatches.push(`frame ${res.answered}: ${got} events, expected ${want}`);
      }
      if (spec.window !== undefined) pump();
      if (stopping && count === 0) finish();
    };
    const pump = () => {
      while (!stopping && count < spec.window!) sendOne(performance.now());
    };
    ws.on("message", onMessage);
    ws.on("close", onClose);
    if (spec.window !== undefined) {
      pump();
      if (stopping && count === 0) finish();
    } else {
      // open loop: frame k is due at start + k / rate
      const interval = 1000 / spec.rate!;
      let next = start;
      const tick = () => {
        const now = performance.now();
        while (!stopping && next <= now) {
          sendOne(next);
          next += interval;
        }
        if (stopping) {
          if (count === 0) finish();
          return;
        }
        setTimeout(tick, Math.max(0, next - performance.now() - 0.05));
      };
      tick();
    }
  });
}

/**
 * --trace rows. Frames: phase (service, echo), timed run, send time, round
 * trip. GC pauses: client_gc (kind as perf_hooks numbers it: 1 minor, 4
 * major, 8 incremental, 16 weak callbacks; at = the pause's start; over the
 * whole bench) and service_gc (s or mc; at = when its --trace-gc-nvp line
 * arrived, just after the pause; during (d) only). Times are this process's
 * performance.now(), ms.
 */
const traceLines: string[] = ["phase,run_or_kind,at_ms,ms"];

/** GC pauses of this (the client) process, ms, for the report. */
const clientGc: { at: number; ms: number; kind: number }[] = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries())
    clientGc.push({ at: e.startTime, ms: e.duration, kind: (e as unknown as { detail?: { kind?: number } }).detail?.kind ?? 0 });
}).observe({ entryTypes: ["gc"] });

interface Figure {
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
async function measure(
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

// ---------------------------------------------------------------- slow frames
/** A time span on this process's performance.now() clock, ms. */
interface Span {
  a: number;
  b: number;
}

/** This process's GC pauses as spans. */
function clientGcSpans(): Span[] {
  return clientGc.map((g) => ({ a: g.at, b: g.at + g.ms }));
}

/** The service's GC pauses as spans: a --trace-gc-nvp line arrives just after its pause. */
function serviceGcSpans(events: GcEvent[]): Span[] {
  return events.map((g) => ({ a: g.at - g.pause - 0.5, b: g.at }));
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

// ---------------------------------------------------------------- scheduling (--sched)
/** performance.now() + MONO_OFFSET_MS = CLOCK_MONOTONIC in ms (what perf's -k CLOCK_MONOTONIC stamps). */
const MONO_OFFSET_MS = Number(process.hrtime.bigint()) / 1e6 - performance.now();

/** One line of `perf sched timehist`: a task ran on `cpu` for `run` ms until `end` (performance.now() clock), after waiting `delay` ms for it. */
interface SchedRun {
  end: number;
  cpu: number;
  task: string;
  tid: number;
  pid: number;
  delay: number;
  run: number;
}

/** Record the machine's scheduler events (`perf sched record`) until stop() (null: perf is missing or not allowed). */
function startSched(file: string): { stop(): Promise<SchedRun[] | null> } {
  const proc = spawn("perf", ["sched", "record", "-k", "CLOCK_MONOTONIC", "-o", file], { stdio: ["ignore", "ignore", "pipe"] });
  const err: string[] = [];
  proc.stderr!.on("data", (d: Buffer) => err.push(d.toString()));
  const exited = once(proc, "exit").catch(() => undefined);
  proc.on("error", () => undefined);
  // never leave perf recording the machine after the bench is gone
  const onExit = () => {
    if (proc.exitCode === null) proc.kill("SIGINT");
  };
  process.once("exit", onExit);
  return {
    async stop() {
      process.off("exit", onExit);
      if (proc.exitCode === null && proc.pid !== undefined) proc.kill("SIGINT");
      await Promise.race([exited, sleep(10_000)]);
      let text: string;
      try {
        text = execSync(`perf sched timehist -i ${JSON.stringify(file)}`, {
          encoding: "utf8",
          maxBuffer: 1 << 30,
          stdio: ["ignore", "pipe", "ignore"],
        });
      } catch {
        process.stderr.write(`[service-bench] --sched: perf sched gave nothing (${err.join("").trim().split("\n")[0] ?? ""})\n`);
        return null;
      } finally {
        rmSync(file, { force: true });
      }
      const out: SchedRun[] = [];
      const re = /^\s*([\d.]+)\s+\[(\d+)\]\s+(.*?)\[(\d+)(?:\/(\d+))?\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)/;
      for (const line of text.split("\n")) {
        const m = re.exec(line);
        if (!m) continue;
        const tid = Number(m[4]);
        out.push({
          end: Number(m[1]) * 1000 - MONO_OFFSET_MS,
          cpu: Number(m[2]),
          task: m[3]!.trim(),
          tid,
          pid: m[5] === undefined ? tid : Number(m[5]),
          delay: Number(m[7]),
          run: Number(m[8]),
        });
      }
      return out;
    },
  };
}

/**
 * How long a thread waited for a CPU (runnable, not running) between
 * `from` and `to`, and what ran on that CPU meanwhile: tasks by name, the
 * bench's own processes by `names` (pid to name), a process's own other
 * threads as such. A wait is charged to the CPU the thread then ran on
 * (right when it was pinned; approximate for a thread that migrated).
 */
function schedWaits(runs: SchedRun[], tid: number, from: number, to: number, names: ReadonlyMap<number, string>, min = 1) {
  const mine = runs.filter((r) => r.tid === tid && r.end - r.run >= from && r.end - r.run <= to);
  const waits: (Span & { cpu: number })[] = mine
    .filter((r) => r.delay > min)
    .map((r) => ({ a: r.end - r.run - r.delay, b: r.end - r.run, cpu: r.cpu }));
  let maxDelay = 0;
  for (const r of mine) if (r.delay > maxDelay) maxDelay = r.delay;
  const instead = new Map<string, number>();
  const pidOf = mine[0]?.pid ?? tid;
  for (const w of waits) {
    for (const r of runs) {
      if (r.cpu !== w.cpu || r.tid === tid) continue;
      const a = Math.max(w.a, r.end - r.run);
      const b = Math.min(w.b, r.end);
      if (b <= a) continue;
      const name = r.pid === pidOf ? "its own process's other threads" : (names.get(r.pid) ?? r.task.replace(/[-/:]\d.*$/, ""));
      instead.set(name, (instead.get(name) ?? 0) + (b - a));
    }
  }
  return {
    spans: waits,
    summary: {
      switch_ins: mine.length,
      waits_over_ms: min,
      waits: waits.length,
      waits_over_2ms: mine.filter((r) => r.delay > 2).length,
      max_wait_ms: maxDelay,
      total_wait_ms: waits.reduce((x, w) => x + (w.b - w.a), 0),
      ran_instead_ms: Object.fromEntries([...instead.entries()].sort((x, y) => y[1] - x[1]).slice(0, 6)),
    },
  };
}

/**
 * A paced figure (`base.rate`, `base.serverPid`): its runs, with the
 * scheduler recorded under --sched, and what its slow frames overlapped.
 * `afterRuns` reads what must be read right after the timed runs (before
 * perf's parsing blocks this thread for seconds) and returns the server's
 * GC pauses.
 */
async function pacedFigure(base: Omit<RunSpec, "ms" | "verify">, traceName: string, serverName: string, afterRuns?: () => Promise<Span[]>) {
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

// ---------------------------------------------------------------- profiles
interface ProfNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

/** Functions whose inclusive time the profile summary lists. */
const INCLUSIVE = [
  "onFrame",
  "readBinaryFrame",
  "postTask",
  "sendFrame",
  "writev",
  "recordCounts",
  "handle",
  "write",
  "toWire",
  "encodeServerFrame",
  "(garbage collector)",
];

/**
 * Self and inclusive time per function of each thread's profile, counted
 * from the thread's first frame-handling sample (start-up excluded); idle
 * time (event loop idle, piscina's Atomics.wait) is left out of the busy total.
 */
function summariseProfiles(dir: string, top: number) {
  const out: {
    file: string;
    thread: string;
    sampled_ms: number;
    idle_pct: number;
    top_self: { fn: string; pct: number }[];
    inclusive: { fn: string; pct: number }[];
  }[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"))) {
    const p = JSON.parse(readFileSync(path.join(dir, file), "utf8")) as { nodes: ProfNode[]; samples: number[]; timeDeltas: number[] };
    const byId = new Map<number, ProfNode>(p.nodes.map((nd) => [nd.id, nd]));
    const parent = new Map<number, number>();
    for (const nd of p.nodes) for (const c of nd.children ?? []) parent.set(c, nd.id);
    const label = (nd: ProfNode) => {
      const cf = nd.callFrame;
      const where = cf.url ? ` ${cf.url.replace(/^.*\/(node_modules\/|dist\/)/, "$1")}:${cf.lineNumber + 1}` : "";
      return `${cf.functionName || "(anonymous)"}${where}`;
    };
    const self = new Map<string, number>();
    const incl = new Map<string, number>();
    let total = 0;
    let idle = 0;
    let started = false;
    for (let i = 0; i < p.samples.length; i++) {
      const nd = byId.get(p.samples[i]!);
      if (!nd) continue;
      const names = new Set<string>();
      for (let id: number | undefined = nd.id; id !== undefined; id = parent.get(id)) names.add(byId.get(id)!.callFrame.functionName);
      if (!started) {
        if (!names.has("onFrame") && !names.has("handle")) continue;
        started = true;
      }
      const dt = Math.max(0, p.timeDeltas[i] ?? 0);
      total += dt;
      const fn = nd.callFrame.functionName;
      if (fn === "(idle)" || fn === "atomicsWaitLoop") {
        idle += dt;
        continue;
      }
      const key = label(nd);
      self.set(key, (self.get(key) ?? 0) + dt);
      for (const n of names) if (INCLUSIVE.includes(n)) incl.set(n, (incl.get(n) ?? 0) + dt);
    }
    const busy = Math.max(1, total - idle);
    const parts = file.split(".");
    out.push({
      file,
      thread: parts[4] === "0" ? "main thread" : `worker thread ${parts[4]}`,
      sampled_ms: total / 1000,
      idle_pct: (100 * idle) / Math.max(1, total),
      top_self: [...self.entries()]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([fn, us]) => ({ fn, pct: (100 * us) / busy })),
      inclusive: [...incl.entries()].sort((a, b) => b[1] - a[1]).map(([fn, us]) => ({ fn, pct: (100 * us) / busy })),
    });
  }
  return out;
}

// ================================================================ main
async function main(): Promise<void> {
  const { HarmonyParser } = await import("../src/core/parser.js");
  const { FLAG_SPECIAL, FLAG_WHOLE, Vocabulary } = await import("../src/core/vocab.js");
  const { schema } = await import("../src/protocol/schema.js");
  const { decodeServerFrame } = await import("../src/protocol/events.js");
  const { loadHarmonyEncoding } = await import("../src/vocab/index.js");
  type Parser = InstanceType<typeof HarmonyParser>;

  if (opts.childCpus) {
    try {
      execSync("taskset -V", { stdio: "ignore" });
    } catch {
      throw new Error("--child-cpus needs taskset (util-linux) on the PATH");
    }
  }
  if (!Number.isInteger(opts.runs) || opts.runs < 1) throw new Error("--runs must be an integer ≥ 1");
  if (!Number.isInteger(opts.clientHeapGrowth) || opts.clientHeapGrowth < 0) throw new Error("--client-heap-growth must be an integer ≥ 0");
  // The client has the service's problem: with V8's own growing factor its
  // old generation had less headroom than its young generation, so it kept
  // marking (12-21 mark-compacts in (d)) on helper threads that share its
  // CPU with the thread that sends and reads. Setting it lowered the
  // paced p99 of every server it measures (bench/RESULTS.md).
  if (opts.clientHeapGrowth > 0) setFlagsFromString(`--heap-growing-percent=${opts.clientHeapGrowth}`);
  const only = new Set(opts.only.split(""));
  if (only.has("d") && opts.rate === undefined) only.add("a");
  const log = (s: string) => process.stderr.write(`[service-bench] ${s}\n`);
  const t0 = performance.now();

  const enc = loadHarmonyEncoding({ shared: true });
  const vocab = new Vocabulary(enc.table);
  const S = schema();
  const DATA = fileURLToPath(new URL("../../bench/data/mix-200k.txt", import.meta.url));
  const completions = readFileSync(DATA, "utf8")
    .trim()
    .split("\n")
    .map((l) => Uint32Array.from(l.trim().split(/\s+/).map(Number)).subarray(2)); // primed: drop <|start|>assistant
  const completionTokens = completions.reduce((a, c) => a + c.length, 0);

  type Ref = { stream: string } | { handle: number };
  type Op = { open: { stream: string; handle?: number } } | { tokens: Ref & { ids: number[] } } | { close: Ref & { reason: string } };
  /** How tokens and close ops name a stream: by handle with --handles. */
  const ref = (name: string, handle: number): Ref => (opts.handles ? { handle } : { stream: name });
  const openOp = (name: string, handle: number): Op => ({ open: opts.handles ? { stream: name, handle } : { stream: name } });
  const encode = (ops: Op[]): Buffer => {
    const u8 = S.ClientFrame.encode({ ops }).finish();
    return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
  };
  const decodeCount = (b: Buffer) => decodeServerFrame(S, b).length;

  /** Assemble a ring from frames given as ops plus their local-replay event counts. */
  const makeRing = (frames: { ops: Op[]; events: number; tokens: number }[]): Ring =>
    new Ring(
      frames.map((f) => encode(f.ops)),
      Uint32Array.from(frames.map((f) => f.events)),
      Uint32Array.from(frames.map((f) => f.tokens)),
    );

  /**
   * (a) step frames: `lanes` streams fed one token per frame. Completion i
   * goes to lane i mod lanes; each lane loops over its completions (a new
   * stream per completion: close the used-up one, open the next, feed its
   * first token, all in one frame). Every chunk is replayed through a local
   * parser to know the events it produces.
   */
  const laneSource = (lanes: number): LaneSource => {
    const chunks: Buffer[] = [];
    const ev: number[] = [];
    const base = new Uint32Array(lanes);
    const period = new Uint32Array(lanes);
    const first: Buffer[] = [];
    const firstEv = new Uint32Array(lanes);
    const one = new Uint32Array(1);
    for (let l = 0; l < lanes; l++) {
      const mine: number[] = [];
      for (let i = l; i < completions.length; i += lanes) mine.push(i);
      if (mine.length === 0) mine.push(l % completions.length);
      base[l] = chunks.length;
      let prev: { name: string; p: Parser } | null = null;
      let step0ops: Op[] = [];
      let step0ev = 0;
      mine.forEach((ci, j) => {
        const comp = completions[ci]!;
        const name = `l${l}.${j}`;
        const p = new HarmonyParser(vocab);
        for (let s = 0; s < comp.length; s++) {
          const ops: Op[] = [];
          let e = 0;
          if (s === 0) {
            if (prev) {
              ops.push({ close: { ...ref(prev.name, l + 1), reason: "eos" } });
              e += prev.p.end("eos").length;
            }
            ops.push(openOp(name, l + 1));
          }
          one[0] = comp[s]!;
          ops.push({ tokens: { ...ref(name, l + 1), ids: [comp[s]!] } });
          e += p.write(one).length;
          if (j === 0 && s === 0) {
            step0ops = ops;
            step0ev = e;
            chunks.push(Buffer.alloc(0)); // placeholder, set below
            ev.push(0);
          } else {
            chunks.push(encode(ops));
            ev.push(e);
          }
        }
        prev = { name, p };
      });
      period[l] = chunks.length - base[l]!;
      // step 0: in the first period as is, in later ones after closing the lane's last stream
      first.push(encode(step0ops));
      firstEv[l] = step0ev;
      const last = prev as { name: string; p: Parser } | null;
      chunks[base[l]!] = encode([{ close: { ...ref(last!.name, l + 1), reason: "eos" } }, ...step0ops]);
      ev[base[l]!] = last!.p.end("eos").length + step0ev;
    }
    const off = new Uint32Array(chunks.length + 1);
    for (let i = 0; i < chunks.length; i++) off[i + 1] = off[i]! + chunks[i]!.length;
    return new LaneSource(base, period, Buffer.concat(chunks), off, Uint32Array.from(ev), first, firstEv);
  };

  /**
   * (b) one stream, one content token per frame: open + `<|channel|>final<|message|>`,
   * then `len` whole-text content tokens from the data (each gives one delta),
   * then close; the ring wraps by reopening the same name.
   */
  const singleRing = (len: number, name: string, handle: number): Ring => {
    const content: number[] = [];
    for (const c of completions) {
      for (const id of c) if ((vocab.flags[id]! & FLAG_WHOLE) !== 0 && (vocab.flags[id]! & FLAG_SPECIAL) === 0) content.push(id);
      if (content.length >= len) break;
    }
    const p = new HarmonyParser(vocab);
    const header = enc.encode("<|channel|>final<|message|>");
    const frames: { ops: Op[]; events: number; tokens: number }[] = [];
    frames.push({
      ops: [openOp(name, handle), { tokens: { ...ref(name, handle), ids: header } }],
      events: p.write(header).length,
      tokens: header.length,
    });
    for (const id of content.slice(0, len)) {
      frames.push({ ops: [{ tokens: { ...ref(name, handle), ids: [id] } }], events: p.write([id]).length, tokens: 1 });
    }
    frames.push({ ops: [{ close: { ...ref(name, handle), reason: "eos" } }], events: p.end("eos").length, tokens: 0 });
    return makeRing(frames);
  };

  const srcA = laneSource(opts.streams);
  const ringB = singleRing(2000, "b", opts.streams + 1); // a handle no lane of (a) uses
  const statsA = srcA.stats();
  const statsB = ringB.stats();
  if (statsB.answered_frames !== statsB.frames)
    log(`warning: ${statsB.frames - statsB.answered_frames} frames of the single-stream ring produce no event`);
  // cost of composing one (a) frame in this process (it is part of the client's time)
  for (let t = 1; t <= 5000; t++) srcA.at(t);
  let composeUs = performance.now();
  for (let t = 5001; t <= 10000; t++) srcA.at(t);
  composeUs = ((performance.now() - composeUs) * 1000) / 5000;
  log(
    `frames built in ${((performance.now() - t0) / 1000).toFixed(1)} s: (a) ${JSON.stringify(statsA)}, compose ${composeUs.toFixed(1)} µs/frame; (b) ${JSON.stringify(statsB)}`,
  );

  // start timing with a compact client heap (the replay left garbage behind)
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  gc();

  const windows = opts.windows.split(",").map(Number);
  const results: Record<string, unknown> = {};
  /** where the service parses: its own report at start-up */
  let layout = "not started";
  let profiles: ReturnType<typeof summariseProfiles> | undefined;
  let aBest: { window: number; fig: Figure } | undefined;
  let dRate = 0;
  /** the service's main-thread CPU per frame in (d), µs (the busy echo matches it) */
  let dCpuUs = 0;

  // ------------------------------------------------------------ service: a, b, d
  if (only.has("a") || only.has("b") || only.has("d")) {
    let profDir: string | undefined;
    if (opts.cpuProf) {
      profDir = path.resolve(opts.cpuProf);
      mkdirSync(profDir, { recursive: true });
      for (const f of readdirSync(profDir))
        if (f.endsWith(".cpuprofile")) throw new Error(`${profDir} already holds profiles; use an empty directory`);
    }
    const srv = await startService(opts.workers, profDir);
    layout = `${String(srv.serving.workers)} worker threads, inline streams: ${String(srv.serving.inline)}`;
    log(`service child pid ${srv.pid} on port ${srv.port} (${layout})`);
    {
      // JIT warm-up of the fresh service (the first seconds run far slower)
      const ws = await connect(srv.port);
      await run({ ws, src: srcA, cursor: { t: 0 }, window: 4, ms: opts.serverWarmup * 750 });
      await run({ ws, src: ringB, cursor: { t: 0 }, window: 1, ms: opts.serverWarmup * 250 });
      await closeWs(ws);
    }

    if (only.has("a")) {
      const perWindow: Record<string, Figure> = {};
      for (const w of windows) {
        const ws = await connect(srv.port);
        const fig = await measure(
          { ws, src: srcA, cursor: { t: 0 }, window: w, serverPid: srv.pid, decode: decodeCount },
          w === windows[0],
        );
        await closeWs(ws);
        perWindow[w] = fig;
        log(
          `(a) window ${w}: ${(fig.tokens_per_s / 1e3).toFixed(0)}k tokens/s, ${fig.frames_per_s.toFixed(0)} frames/s, p99 ${fig.latency.p99_ms.toFixed(2)} ms`,
        );
        if (fig.warmup_mismatches.length > 0) log(`(a) answer mismatches: ${fig.warmup_mismatches.join("; ")}`);
        if (!aBest || fig.tokens_per_s > aBest.fig.tokens_per_s) aBest = { window: w, fig };
      }
      results.a_step_frames = {
        streams: opts.streams,
        frames: { ...statsA, compose_us_per_frame: composeUs },
        best_window: aBest!.window,
        windows: strip(perWindow),
      };
    }

    if (only.has("b")) {
      let ws = await connect(srv.port);
      const seq = await measure({ ws, src: ringB, cursor: { t: 0 }, window: 1, serverPid: srv.pid, decode: decodeCount }, true);
      await closeWs(ws);
      log(
        `(b) sequential: ${seq.frames_per_s.toFixed(0)} frames/s, p50 ${seq.latency.p50_ms.toFixed(3)} ms, p99 ${seq.latency.p99_ms.toFixed(3)} ms`,
      );
      ws = await connect(srv.port);
      const pipe = await measure(
        { ws, src: ringB, cursor: { t: 0 }, window: opts.pipeline, serverPid: srv.pid, decode: decodeCount },
        false,
      );
      await closeWs(ws);
      log(`(b) pipelined (window ${opts.pipeline}): ${pipe.frames_per_s.toFixed(0)} frames/s, p50 ${pipe.latency.p50_ms.toFixed(3)} ms`);
      results.b_single_stream = { ring: statsB, sequential: strip(seq), pipelined: { window: opts.pipeline, ...strip(pipe) } };
    }

    if (only.has("d")) {
      dRate = opts.rate ?? opts.load * aBest!.fig.frames_per_s;
      const ws = await connect(srv.port);
      const m0 = await fetchMetrics(srv.port);
      const dFrom = performance.now();
      let gcs: GcEvent[] = [];
      let frameTime: ReturnType<typeof frameTimeShares> = { frames: 0, within: [] };
      let rssAfter = 0;
      let dTo = 0;
      const { fig, slow, sched } = await pacedFigure(
        { ws, src: srcA, cursor: { t: 0 }, rate: dRate, serverPid: srv.pid },
        "service",
        "the service",
        async () => {
          await sleep(100); // the service's last GC lines are on their way through the pipe
          dTo = performance.now();
          gcs = gcEvents(srv.other, dFrom, dTo);
          frameTime = frameTimeShares(m0, await fetchMetrics(srv.port));
          rssAfter = vmRssBytes(srv.pid);
          return serviceGcSpans(gcs);
        },
      );
      const serviceGc = summariseGc(gcs);
      // trace rows: kind s or mc, when the line arrived (just after the pause), pause ms
      if (opts.trace) for (const g of gcs) traceLines.push(`service_gc,${g.kind},${g.at.toFixed(3)},${g.pause}`);
      await closeWs(ws);
      if (opts.childOutput)
        log(`(d) ran from ${dFrom.toFixed(0)} to ${dTo.toFixed(0)} ms on the client's clock (service child ${srv.pid})`);
      log(`(d) paced at ${dRate.toFixed(0)} frames/s: p50 ${fig.latency.p50_ms.toFixed(3)} ms, p99 ${fig.latency.p99_ms.toFixed(3)} ms`);
      results.d_paced = {
        load: opts.rate === undefined ? opts.load : NaN,
        frames_per_s_target: dRate,
        tokens_per_s_target: dRate * opts.streams,
        ...strip(fig),
        service_gc: serviceGc,
        service_frame_time: frameTime,
        service_rss_bytes: rssAfter,
        slow,
        sched,
      };
      dCpuUs = (fig.server_main_cpu * 1e6) / fig.frames_per_s;
    }

    await sleep(300);
    const metrics = await fetchMetrics(srv.port);
    await stopChild(srv);
    results.service_checks = {
      metrics_after_all_connections_closed: metrics,
      warn_log_lines: srv.warnLines.length,
      warn_log_sample: srv.warnLines.slice(0, 3),
      stderr: srv.stderr.slice(0, 5),
    };
    if (opts.trace && srv.other.length > 0)
      writeFileSync(`${opts.trace}.server.txt`, srv.other.map((o) => `${o.at.toFixed(1)} ${o.line}`).join("\n") + "\n");
    if (profDir) {
      await sleep(500);
      profiles = summariseProfiles(profDir, 15);
      results.cpu_profiles = profiles;
    }
  }

  // ------------------------------------------------------------ echo baseline: c
  if (only.has("c")) {
    const echo = await startEcho();
    log(`echo child pid ${echo.pid} on port ${echo.port}`);
    const c: NonNullable<Report["c_echo"]> = {};
    if (only.has("a")) {
      const w = aBest?.window ?? windows[windows.length - 1]!;
      const ws = await connect(echo.port);
      const fig = await measure({ ws, src: srcA, answerAll: true, cursor: { t: 0 }, window: w, serverPid: echo.pid }, false);
      await closeWs(ws);
      c.step_frames = { window: w, ...strip(fig) };
      log(`(c) step frames, window ${w}: ${fig.frames_per_s.toFixed(0)} frames/s`);
    }
    {
      let ws = await connect(echo.port);
      const seq = await measure({ ws, src: ringB, answerAll: true, cursor: { t: 0 }, window: 1, serverPid: echo.pid }, false);
      await closeWs(ws);
      ws = await connect(echo.port);
      const pipe = await measure({ ws, src: ringB, answerAll: true, cursor: { t: 0 }, window: opts.pipeline, serverPid: echo.pid }, false);
      await closeWs(ws);
      c.single_sequential = strip(seq);
      c.single_pipelined = { window: opts.pipeline, ...strip(pipe) };
      log(`(c) single: ${seq.frames_per_s.toFixed(0)} frames/s sequential, ${pipe.frames_per_s.toFixed(0)} pipelined`);
    }
    /** (a) frames paced at the rate of (d), to an echo server; what the slow frames overlapped */
    const paced = async (server: Child, traceName: string) => {
      const ws = await connect(server.port);
      const { fig, slow, sched } = await pacedFigure(
        { ws, src: srcA, answerAll: true, cursor: { t: 0 }, rate: dRate, serverPid: server.pid },
        traceName,
        "the echo server",
      );
      await closeWs(ws);
      return { frames_per_s_target: dRate, ...strip(fig), slow, sched };
    };
    if (dRate > 0) {
      c.step_frames_paced = await paced(echo, "echo");
      log(`(c) step frames paced at ${dRate.toFixed(0)}/s: p99 ${c.step_frames_paced.latency.p99_ms.toFixed(3)} ms`);
    }
    await stopChild(echo);
    const echoCpuUs = c.step_frames_paced ? (c.step_frames_paced.server_main_cpu * 1e6) / c.step_frames_paced.frames_per_s : 0;
    if (dRate > 0 && dCpuUs > echoCpuUs) {
      // the same pace to an echo whose main thread spends as much CPU per
      // frame as the service's did in (d) (its own echoing plus a spin for
      // the rest): what that load costs the p99 on this machine, parsing
      // aside. The spin reads the process's CPU time, of which the echo's
      // other threads use little.
      const work = Math.round(dCpuUs - echoCpuUs);
      const busy = await startEcho(work);
      const fig = await paced(busy, "busy_echo");
      await stopChild(busy);
      c.step_frames_paced_busy = { work_us: work, ...fig };
      log(
        `(c) step frames paced at ${dRate.toFixed(0)}/s to an echo spinning ${work} µs of CPU per frame: p99 ${fig.latency.p99_ms.toFixed(3)} ms`,
      );
    }
    results.c_echo = c;
  }

  // ------------------------------------------------------------ memory: e
  if (only.has("e")) {
    results.e_memory = await memoryPhase();
  }

  // ------------------------------------------------------------ (e) helpers
  async function memoryPhase() {
    const N = opts.memStreams;
    const K = opts.memDepth;
    const PER = Math.max(1, Math.min(500, Math.floor(200_000 / K))); // streams per frame, under the ids-per-frame limit // tokens fed to each stream (8: a header and a few content tokens)
    /** The ids fed to stream i of a batch starting at completion `firstComp`. */
    const idsOf = (firstComp: number, i: number) => {
      // the stream's completion, then the following ones, up to K tokens
      const ids: number[] = [];
      for (let c = firstComp + i; ids.length < K; c++) {
        const comp = completions[c % completions.length]!;
        for (let j = 0; j < comp.length && ids.length < K; j++) ids.push(comp[j]!);
      }
      return ids;
    };
    const frame = (names: string[], firstComp: number) => {
      const ops: Op[] = [];
      let events = 0;
      names.forEach((name, i) => {
        const ids = idsOf(firstComp, i);
        ops.push({ open: { stream: name } }, { tokens: { stream: name, ids } });
        events += new HarmonyParser(vocab).write(ids).length;
      });
      return { ops, events, tokens: names.length * K };
    };
    /** Closing them (abort): the events each one's end gives, replayed locally. */
    const closeFrame = (names: string[], firstComp: number) => {
      let events = 0;
      names.forEach((_, i) => {
        const p = new HarmonyParser(vocab);
        p.write(idsOf(firstComp, i));
        events += p.end("abort").length;
      });
      return { ops: names.map((s) => ({ close: { stream: s, reason: "abort" } })), events, tokens: 0 };
    };
    const names = (pfx: string, from: number, n: number) => Array.from({ length: n }, (_, i) => `${pfx}${from + i}`);
    const warmNames = names("w", 0, PER);
    const warm = makeRing([frame(warmNames, 0), closeFrame(warmNames, 0)]);
    const openFrames: { ops: Op[]; events: number; tokens: number }[] = [];
    for (let at = 0; at < N; at += PER) openFrames.push(frame(names("m", at, Math.min(PER, N - at)), at));
    const open = makeRing(openFrames);

    const srv = await startService(opts.workers);
    if (layout === "not started") layout = `${String(srv.serving.workers)} worker threads, inline streams: ${String(srv.serving.inline)}`;
    const ws = await connect(srv.port);
    const sample = async () => {
      await sleep(700);
      const xs: number[] = [];
      for (let i = 0; i < 5; i++) {
        xs.push(vmRssBytes(srv.pid));
        await sleep(100);
      }
      return median(xs);
    };
    const rssStart = vmRssBytes(srv.pid);
    const mismatches: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await run({ ws, src: warm, cursor: { t: 0 }, window: 1, maxFrames: 2, verify: true, decode: decodeCount });
      mismatches.push(...r.mismatches);
    }
    const rss0 = await sample();
    const cursor = { t: 0 };
    // open them in 5 steps, sampling RSS after each: the slope of a least-squares
    // line through the samples is less sensitive to garbage than one difference
    const points: [number, number][] = [[0, rss0]];
    const steps = 5;
    let sent = 0;
    for (let k = 1; k <= steps; k++) {
      const upto = Math.round((open.frames.length * k) / steps);
      const r = await run({ ws, src: open, cursor, window: 4, maxFrames: upto - sent, verify: true, decode: decodeCount });
      mismatches.push(...r.mismatches);
      sent = upto;
      points.push([Math.min(N, sent * PER), await sample()]);
    }
    const rssFull = points[points.length - 1]![1];
    const mx = points.reduce((a, p) => a + p[0], 0) / points.length;
    const my = points.reduce((a, p) => a + p[1], 0) / points.length;
    const slope = points.reduce((a, p) => a + (p[0] - mx) * (p[1] - my), 0) / points.reduce((a, p) => a + (p[0] - mx) ** 2, 0);
    const mFull = await fetchMetrics(srv.port);
    await closeWs(ws);
    const rssClosed = await sample();
    await sleep(500);
    const mClosed = await fetchMetrics(srv.port);
    // leak check: two more cycles of open all on a new connection, then disconnect
    const rssCycles: number[] = [];
    for (let cycle = 0; cycle < opts.memCycles; cycle++) {
      const ws2 = await connect(srv.port);
      const r = await run({ ws: ws2, src: open, cursor: { t: 0 }, window: 4, maxFrames: open.frames.length });
      mismatches.push(...r.mismatches);
      await closeWs(ws2);
      rssCycles.push(await sample());
    }
    await stopChild(srv);

    // the same streams on a service in this process (no worker threads, so
    // every stream's state is on this heap), measured after forced GCs: the
    // state an open stream holds, without the garbage RSS also counts
    const { Service, DEFAULT_LIMITS } = await import("../src/service/service.js");
    const { pino } = await import("pino");
    const local = new Service({
      host: "127.0.0.1",
      port: 0,
      grpcPort: -1,
      workers: 0,
      drainTimeoutMs: 2000,
      limits: DEFAULT_LIMITS,
      logger: pino({ level: "silent" }),
    });
    const localPorts = await local.start();
    const wsLocal = await connect(localPorts.port);
    const held = () => {
      gc();
      gc();
      const m = process.memoryUsage();
      return { heap: m.heapUsed, total: m.heapUsed + m.external };
    };
    // a first cycle fills what is cached once per process (token strings,
    // compiled code); the second is measured
    const cycleLocal = async (ws: WebSocket) => {
      const rl = await run({
        ws,
        src: open,
        cursor: { t: 0 },
        window: 4,
        maxFrames: open.frames.length,
        verify: true,
        decode: decodeCount,
      });
      mismatches.push(...rl.mismatches);
      await sleep(200);
      return held();
    };
    await cycleLocal(wsLocal);
    await closeWs(wsLocal);
    await sleep(300);
    const h0 = held();
    const wsLocal2 = await connect(localPorts.port);
    const h1 = await cycleLocal(wsLocal2);
    await closeWs(wsLocal2);
    await sleep(300);
    const h2 = held();
    await local.stop();

    return {
      streams: N,
      tokens_per_stream: K,
      per_frame: PER,
      open_frames: open.frames.length,
      rss_start_bytes: rssStart,
      rss_baseline_bytes: rss0,
      rss_points: points.map(([n, b]) => ({ streams: n, rss_bytes: b })),
      rss_full_bytes: rssFull,
      rss_after_close_bytes: rssClosed,
      rss_after_more_cycles_bytes: rssCycles,
      bytes_per_stream: (rssFull - rss0) / N,
      bytes_per_stream_slope: slope,
      open_streams_metric_full: mFull["harmony_open_streams"],
      open_streams_metric_after_close: mClosed["harmony_open_streams"],
      in_process_bytes_per_stream: (h1.total - h0.total) / N,
      in_process_heap_bytes_per_stream: (h1.heap - h0.heap) / N,
      in_process_bytes_after_close: h2.total - h0.total,
      mismatches,
      warn_log_lines: srv.warnLines.length,
    };
  }

  if (opts.trace) {
    // the client's own GC pauses, on the same clock as the frames' send times
    for (const g of clientGc) traceLines.push(`client_gc,${g.kind},${g.at.toFixed(3)},${g.ms.toFixed(3)}`);
    writeFileSync(opts.trace, traceLines.join("\n") + "\n");
  }

  // ------------------------------------------------------------ report
  const machine = {
    cpu: os.cpus()[0]?.model ?? "unknown",
    cores: os.cpus().length,
    memory_gib: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
    loadavg_at_end: os.loadavg().map((x) => Number(x.toFixed(2))),
  };
  const setup = {
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
  const report = { machine, setup, data: { completions: completions.length, completion_tokens: completionTokens }, ...results };
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

/** Drop per-run raw data (histograms) from a figure for the report. */
function strip(f: Figure): SFig;
function strip(f: Record<string, Figure>): Record<string, SFig>;
function strip(f: Figure | Record<string, Figure>): SFig | Record<string, SFig> {
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

// ================================================================ Markdown
/** A paced figure: what its slow frames overlapped and, with --sched, how long the main threads waited for a CPU. */
type PacedFig = SFig & {
  frames_per_s_target: number;
  slow: ReturnType<typeof slowFrames>;
  sched?: { server: ReturnType<typeof schedWaits>["summary"]; client: ReturnType<typeof schedWaits>["summary"] };
};
type SFig = Omit<Figure, "runs"> & {
  runs_tokens_per_s: number[];
  runs_frames_per_s: number[];
  window?: number;
  warmup_mismatches?: string[];
};
interface Report {
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

function markdown(r: Report): string {
  const k = (x: number) => (x >= 1e6 ? `${(x / 1e6).toFixed(2)}M` : x >= 1e4 ? `${(x / 1e3).toFixed(0)}k` : x.toFixed(0));
  const ms = (x: number | undefined) => (x === undefined ? "–" : x < 1 ? x.toFixed(3) : x.toFixed(2));
  const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
  const cpu = (f: SFig) => `${pct(f.server_cpu)} (main ${pct(f.server_main_cpu)}) / ${pct(f.client_cpu)}`;
  const met = (ok: boolean) => (ok ? "met" : "**not met**");
  const L: string[] = [];
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
  /** what a paced figure's slow frames overlapped, and the main threads' waits for a CPU (--sched) */
  const pacedNotes = (name: string, server: string, f: PacedFig | undefined) => {
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
  };
  if (d) {
    const ft = d.service_frame_time;
    L.push(
      `(d) the service's own time per frame (harmony_frame_latency_seconds, a frame read to its answer handed to the socket; warm-up included, ${ft.frames} frames): ${ft.within.map((x) => `${x.pct.toFixed(2)}% within ${x.ms} ms`).join(", ")}. Service RSS right after (d): ${(d.service_rss_bytes / 2 ** 20).toFixed(0)} MiB.`,
    );
  }
  pacedNotes("(d)", "service", d);
  pacedNotes("(c) echo paced:", "echo server", c?.step_frames_paced);
  pacedNotes(`(c) busy echo paced:`, "echo server", c?.step_frames_paced_busy);
  if (d?.latency_sched)
    L.push(
      `(d) latency from each frame's scheduled send time (coordinated omission corrected): p50 ${ms(d.latency_sched.p50_ms)} ms, p99 ${ms(d.latency_sched.p99_ms)} ms, max ${ms(d.latency_sched.max_ms)} ms; most frames in flight ${d.max_inflight}.`,
    );
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
  return L.join("\n");
}

// ================================================================ echo child
function runEchoChild(): void {
  // the same transport set-up as src/transport/http.ts, minus the service
  const server = http.createServer((_req, res) => {
    res.writeHead(404);
    res.end();
  });
  const wss = new WebSocketServer({ noServer: true, maxPayload: 4 * 1024 * 1024, perMessageDeflate: false });
  server.on("upgrade", (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      const work = opts.echoWorkUs;
      // CPU time, not wall time: a pause of the process (descheduled, GC)
      // delays the frame as it would delay the service's parsing
      const cpu = () => {
        const u = process.cpuUsage();
        return u.user + u.system;
      };
      ws.on("message", (data, isBinary) => {
        if (work > 0) {
          const until = cpu() + work;
          while (cpu() < until);
        }
        ws.send(data as Buffer, { binary: isBinary });
      });
    });
  });
  server.listen(0, "127.0.0.1", () => {
    console.log(JSON.stringify({ msg: "echo serving", port: (server.address() as AddressInfo).port }));
  });
  process.on("SIGTERM", () => process.exit(0));
}

if (opts.child === "echo") runEchoChild();
else await main();
