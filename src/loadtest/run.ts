/**
 * The load tester: drives many generated streams through a running server
 * (or one it starts itself), the way an inference engine does — many streams
 * multiplexed on one connection, one frame per engine step — and checks
 * every stream's events against what the model meant.
 */
import cliProgress from "cli-progress";
import { HarmonyClient } from "../client/index.js";
import type { HarmonyEvent } from "../core/events.js";
import { CodedError } from "../core/errors.js";
import type { Vocabulary } from "../core/vocab.js";
import { check, FAILURE_KINDS, observe, type FailureKind } from "./check.js";
import { FAULT_KINDS, generateStream, type Encoder, type FaultKind, type GeneratedStream } from "./generate.js";
import { LatencyHistogram, minSamples } from "./percentiles.js";

export type Chunking = "one" | "random" | "whole" | "step";

export interface LoadtestOptions {
  /** ws://… URL; or `grpc` host:port; neither: start a server on a free loopback port. */
  url?: string;
  grpc?: string;
  token?: string;
  streams: number;
  /** Streams open at once. */
  concurrency: number;
  /** Streams that get tokens in one frame (an engine step's batch). */
  streamsPerFrame: number;
  chunking: Chunking;
  /** Tokens per op with `step` chunking. */
  stepTokens: number;
  faultRate: number;
  faults: FaultKind[];
  seed: number;
  /** Stop opening streams after this many seconds (0: no cap). */
  durationSec: number;
  mode: "resilient" | "strict";
  /** Unanswered frames allowed in flight. */
  window: number;
  /** Also run the same streams in strict mode and compare. */
  compareStrict: boolean;
  /** Name streams by numeric handle on the wire (Open.handle). */
  handles?: boolean;
  /** Replay only the stream with this index (and print it in full). */
  only?: number;
  progress: boolean;
}

export interface FailureExample {
  seed: number;
  index: number;
  fault: FaultKind | null;
  kind: FailureKind;
  detail: string;
  replay: string;
}

export interface PassReport {
  mode: "resilient" | "strict";
  streams: number;
  tokens: number;
  seconds: number;
  tokens_per_second: number;
  /** Frame latency: frames timed, and percentiles from an HDR histogram, each within [min, max] (./percentiles.ts). */
  latency_ms: { count: number; min: number; p50: number; p90: number; p99: number; max: number };
  faults_injected: Record<string, number>;
  recoveries: Record<string, number>;
  tool_calls: { intended: number; recovered: number };
  failed_streams: number;
  failures: Record<string, number>;
  examples: FailureExample[];
  /** Frame latency buckets (4 per doubling, the non-empty ones, ascending): the HTML report's histogram. */
  latency_histogram: { lower_ms: number; upper_ms: number; count: number }[];
  /** Frame latency at percentiles 50 … 99.99, those the frames timed support (p99.9: 1,000 frames): the percentile curve. */
  latency_percentiles: { p: number; ms: number }[];
  /** Tokens per second, sampled about every 100 ms and at the end (`t`: seconds from the start). */
  throughput: { t: number; tokens_per_second: number }[];
  /**
   * At the same instants: streams open, and the frames answered since the
   * last sample with their latency (null when none was; p99 from 100 frames).
   */
  over_time: OverTime[];
  /** Failed streams by injected fault (`none`: unfaulted). */
  faults_failed: Record<string, number>;
}

/** One sample of a pass's state over time. */
export interface OverTime {
  t: number;
  open_streams: number;
  frames: number;
  latency_p50_ms: number | null;
  latency_p99_ms: number | null;
  latency_max_ms: number | null;
}

/** Latency buckets: 4 per doubling of the microseconds (log2 quarter steps). */
const BUCKETS_PER_DOUBLING = 4;
const bucketOf = (us: number) => Math.floor(Math.log2(Math.max(1, us)) * BUCKETS_PER_DOUBLING);
const bucketEdgeMs = (b: number) => 2 ** (b / BUCKETS_PER_DOUBLING) / 1000;

export interface Report {
  target: string;
  seed: number;
  fault_rate: number;
  chunking: Chunking;
  resilient: PassReport;
  strict?: PassReport;
  ok: boolean;
}

interface Live {
  gen: GeneratedStream;
  pos: number;
  events: HarmonyEvent[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The command that replays stream `index` of a run: the same target (none
 * for a server the load tester started itself: the replay starts one too),
 * seed, faults, chunking and mode. A token is not written out: `$TOKEN`
 * stands for it.
 */
export function replayCommand(opts: LoadtestOptions, mode: "resilient" | "strict", index: number, inProcess: boolean): string {
  const parts = ["npx harmony-sidecar loadtest"];
  if (!inProcess && opts.url) parts.push(`--url ${opts.url}`);
  else if (!inProcess && opts.grpc) parts.push(`--grpc ${opts.grpc}`);
  if (opts.token) parts.push(`--token "$TOKEN"`);
  parts.push(`--seed ${opts.seed}`, `--only ${index}`, `--fault-rate ${opts.faultRate}`);
  const all = opts.faults.length === FAULT_KINDS.length && FAULT_KINDS.every((k) => opts.faults.includes(k));
  if (!all) parts.push(`--faults ${opts.faults.length > 0 ? opts.faults.join(",") : "none"}`);
  if (opts.chunking !== "random") parts.push(`--chunking ${opts.chunking}`);
  if (opts.chunking === "step") parts.push(`--step-tokens ${opts.stepTokens}`);
  parts.push(`--mode ${mode}`);
  if (opts.handles) parts.push("--handles");
  return parts.join(" ");
}

/** One pass over the streams in one parser mode. */
async function pass(
  client: HarmonyClient,
  opts: LoadtestOptions,
  mode: "resilient" | "strict",
  enc: Encoder,
  vocab: Vocabulary,
  label: string,
  inProcess: boolean,
): Promise<PassReport> {
  const histogram = new LatencyHistogram();
  const interval = new LatencyHistogram(); // the frames since the last sample
  const overTime: OverTime[] = [];
  const live = new Map<string, Live>();
  const faults: Record<string, number> = {};
  const faultsFailed: Record<string, number> = {};
  const buckets = new Map<number, number>();
  const throughput: { t: number; tokens_per_second: number }[] = [];
  const recoveries: Record<string, number> = {};
  const failures: Record<string, number> = {};
  const examples: FailureExample[] = [];
  let toolCalls = 0;
  let toolCallsRecovered = 0;
  let failed = 0;
  let tokens = 0;
  let finished = 0;
  let next = opts.only ?? 0;
  const last = opts.only !== undefined ? opts.only + 1 : opts.streams;
  const total = last - next;
  const prefix = `${label}-`;
  const syncSent = new Map<string, number>();
  let unanswered = 0;
  let wake: (() => void) | null = null;
  const started = performance.now();
  const deadline = opts.durationSec > 0 ? started + opts.durationSec * 1000 : Infinity;
  const chunkRng = (() => {
    let a = (opts.seed ^ 0x5bd1e995) >>> 0;
    return () => {
      a = (Math.imul(a ^ (a >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
      return a / 4294967296;
    };
  })();

  const bar =
    opts.progress && process.stderr.isTTY
      ? new cliProgress.SingleBar(
          {
            format: `${label} [{bar}] {value}/{total} streams | {rate} tok/s | failures {failures}`,
            stream: process.stderr,
            hideCursor: true,
          },
          cliProgress.Presets.shades_classic,
        )
      : null;
  bar?.start(total, 0, { rate: 0, failures: 0 });
  const sampleOverTime = (t: number) => {
    const n = interval.count;
    overTime.push({
      t,
      open_streams: live.size,
      frames: n,
      latency_p50_ms: n > 0 ? interval.at(50) : null,
      latency_p99_ms: n >= minSamples(99) ? interval.at(99) : null,
      latency_max_ms: n > 0 ? interval.max : null,
    });
    interval.reset();
  };

  const finish = (name: string, l: Live) => {
    live.delete(name);
    finished++;
    const got = observe(l.events);
    for (const k of got.recoveries) recoveries[k] = (recoveries[k] ?? 0) + 1;
    const r = check(l.gen.intended, got);
    toolCalls += r.toolCalls;
    toolCallsRecovered += r.toolCallsRecovered;
    if (r.failures.length > 0) {
      failed++;
      const fault = l.gen.fault ?? "none";
      faultsFailed[fault] = (faultsFailed[fault] ?? 0) + 1;
      for (const f of r.failures) {
        failures[f.kind] = (failures[f.kind] ?? 0) + 1;
        if (examples.filter((e) => e.kind === f.kind).length < 3) {
          examples.push({
            seed: opts.seed,
            index: l.gen.index,
            fault: l.gen.fault,
            kind: f.kind,
            detail: f.detail,
            replay: replayCommand(opts, mode, l.gen.index, inProcess),
          });
        }
      }
    }
    if (opts.only !== undefined) {
      process.stdout.write(
        JSON.stringify(
          {
            index: l.gen.index,
            fault: l.gen.fault,
            shape: l.gen.shape,
            tokens: l.gen.tokens,
            intended: l.gen.intended,
            got: got.messages,
            events: l.events,
            failures: r.failures,
          },
          null,
          2,
        ) + "\n",
      );
    }
  };

  client.onEvent((stream, ev) => {
    if (!stream.startsWith(prefix)) return;
    if (stream.startsWith(`${prefix}sync`)) {
      if (ev.type === "done") {
        const t = syncSent.get(stream);
        if (t !== undefined) {
          const us = Math.max(1, Math.round((performance.now() - t) * 1000));
          histogram.record(us);
          interval.record(us);
          const b = bucketOf(us);
          buckets.set(b, (buckets.get(b) ?? 0) + 1);
        }
        syncSent.delete(stream);
        unanswered--;
        wake?.();
      }
      return;
    }
    const l = live.get(stream);
    if (!l) return;
    l.events.push(ev);
    if (ev.type === "done") finish(stream, l);
  });

  let frameNo = 0;
  let rr = 0;
  let lastTick = performance.now();
  let lastTokens = 0;
  while (finished < total) {
    // open new streams up to the concurrency
    const frame = client.batch();
    while (live.size < opts.concurrency && next < last && performance.now() < deadline) {
      const gen = generateStream(next, { seed: opts.seed, faultRate: opts.faultRate, faults: opts.faults }, enc, vocab);
      faults[gen.fault ?? "none"] = (faults[gen.fault ?? "none"] ?? 0) + 1;
      const name = `${prefix}${next}`;
      live.set(name, { gen, pos: 0, events: [] });
      frame.open(name, { mode, wholeMessages: false });
      next++;
    }
    if (live.size === 0 && (next >= last || performance.now() >= deadline)) break;
    // one engine step: the next chunk of up to streamsPerFrame streams
    const names = [...live.keys()];
    const n = Math.min(opts.streamsPerFrame, names.length);
    for (let k = 0; k < n; k++) {
      const name = names[(rr + k) % names.length]!;
      const l = live.get(name)!;
      if (l.pos > l.gen.tokens.length) continue; // closed, waiting for done
      const left = l.gen.tokens.length - l.pos;
      const size =
        opts.chunking === "one"
          ? 1
          : opts.chunking === "whole"
            ? left
            : opts.chunking === "step"
              ? opts.stepTokens
              : 1 + Math.floor(chunkRng() * 8);
      const chunk = l.gen.tokens.slice(l.pos, l.pos + size);
      if (chunk.length > 0) frame.tokens(name, chunk);
      tokens += chunk.length;
      l.pos += chunk.length;
      if (l.pos >= l.gen.tokens.length) {
        frame.close(name);
        l.pos = l.gen.tokens.length + 1;
      }
    }
    rr = (rr + n) % Math.max(1, names.length);
    // a barrier stream answers every frame, so the window and latency are exact
    const sync = `${prefix}sync${frameNo++}`;
    frame.open(sync).close(sync);
    syncSent.set(sync, performance.now());
    unanswered++;
    frame.send();
    while (unanswered >= opts.window) {
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
      wake = null;
    }
    const now = performance.now();
    if (now - lastTick > 100) {
      const rate = ((tokens - lastTokens) / (now - lastTick)) * 1000;
      throughput.push({ t: (now - started) / 1000, tokens_per_second: rate });
      sampleOverTime((now - started) / 1000);
      bar?.update(finished, { rate: Math.round(rate), failures: failed });
      lastTick = now;
      lastTokens = tokens;
    }
    if (client.closed) throw new CodedError("unreachable", "the server closed the connection");
  }
  // wait for the last answers
  const waitUntil = performance.now() + 30_000;
  while ((unanswered > 0 || live.size > 0) && performance.now() < waitUntil && !client.closed) await sleep(5);
  for (const [name, l] of live) {
    l.events.push({ type: "error", code: "no_answer", message: "no done before the end of the run", at: 0, token: null });
    finish(name, l);
  }
  const end = performance.now();
  if (tokens > lastTokens && end > lastTick) {
    throughput.push({ t: (end - started) / 1000, tokens_per_second: ((tokens - lastTokens) / (end - lastTick)) * 1000 });
    sampleOverTime((end - started) / 1000);
  }
  bar?.update(finished, { rate: 0, failures: failed });
  bar?.stop();
  const seconds = (performance.now() - started) / 1000;
  const q = (p: number) => histogram.at(p);
  return {
    mode,
    streams: finished,
    tokens,
    seconds,
    tokens_per_second: tokens / seconds,
    latency_ms: { count: histogram.count, min: histogram.min, p50: q(50), p90: q(90), p99: q(99), max: histogram.max },
    faults_injected: faults,
    recoveries,
    tool_calls: { intended: toolCalls, recovered: toolCallsRecovered },
    failed_streams: failed,
    failures,
    examples,
    latency_histogram: [...buckets.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([b, count]) => ({ lower_ms: bucketEdgeMs(b), upper_ms: bucketEdgeMs(b + 1), count })),
    latency_percentiles: histogram.percentiles(),
    throughput,
    over_time: overTime,
    faults_failed: faultsFailed,
  };
}

/**
 * Run against `opts.url` (WebSocket) or `opts.grpc`; `label` names the
 * target in the report instead of its address (an in-process server's port
 * says nothing).
 */
export async function runLoadtest(opts: LoadtestOptions, enc: Encoder, vocab: Vocabulary, label?: string): Promise<Report> {
  const target = opts.url ?? (opts.grpc ? `grpc://${opts.grpc}` : null);
  if (target === null) throw new CodedError("usage", "no target: give a WebSocket URL or a gRPC address");
  const client = await HarmonyClient.connect(target, { ...(opts.token ? { token: opts.token } : {}), handles: opts.handles === true });
  try {
    const inProcess = label !== undefined;
    const resilient = await pass(client, opts, opts.mode, enc, vocab, opts.mode === "strict" ? "strict" : "resilient", inProcess);
    const strict =
      opts.compareStrict && opts.mode !== "strict" ? await pass(client, opts, "strict", enc, vocab, "strict", inProcess) : undefined;
    return {
      target: label ?? target,
      seed: opts.seed,
      fault_rate: opts.faultRate,
      chunking: opts.chunking,
      resilient,
      ...(strict ? { strict } : {}),
      ok: resilient.failed_streams === 0 && resilient.streams > 0,
    };
  } finally {
    await client.close().catch(() => undefined);
  }
}

const pct = (a: number, b: number) => (b === 0 ? "0" : ((100 * a) / b).toFixed(2));

export function formatReport(r: Report): string {
  const p = r.resilient;
  const lines: string[] = [];
  lines.push(`Target: ${r.target}; seed ${r.seed}; fault rate ${r.fault_rate}; chunking ${r.chunking}; mode ${p.mode}`);
  lines.push("");
  lines.push("| | |");
  lines.push("|---|---|");
  lines.push(`| streams | ${p.streams} |`);
  lines.push(`| tokens | ${p.tokens} |`);
  lines.push(`| duration | ${p.seconds.toFixed(1)} s |`);
  lines.push(`| tokens/s | ${Math.round(p.tokens_per_second)} |`);
  lines.push(
    `| frame latency p50 / p90 / p99 / max | ${p.latency_ms.p50.toFixed(2)} / ${p.latency_ms.p90.toFixed(2)} / ${p.latency_ms.p99.toFixed(2)} / ${p.latency_ms.max.toFixed(2)} ms |`,
  );
  lines.push(`| intended tool calls recovered | ${p.tool_calls.recovered} of ${p.tool_calls.intended} |`);
  lines.push(`| streams failed | ${p.failed_streams} (${pct(p.failed_streams, p.streams)}%) |`);
  lines.push("");
  const faulted = Object.entries(p.faults_injected).filter(([k]) => k !== "none");
  lines.push(`Faults injected: ${faulted.reduce((a, [, n]) => a + n, 0)} streams of ${p.streams}`);
  lines.push("");
  lines.push("| fault | streams |");
  lines.push("|---|---|");
  for (const [k, n] of faulted.sort((a, b) => b[1] - a[1])) lines.push(`| ${k} | ${n} |`);
  lines.push("");
  lines.push("| recovery kind | count |");
  lines.push("|---|---|");
  for (const [k, n] of Object.entries(p.recoveries).sort((a, b) => b[1] - a[1])) lines.push(`| ${k} | ${n} |`);
  lines.push("");
  if (p.failed_streams > 0) {
    lines.push("| failure | streams |");
    lines.push("|---|---|");
    for (const k of FAILURE_KINDS) if (p.failures[k]) lines.push(`| ${k} | ${p.failures[k]} |`);
    lines.push("");
    lines.push("First examples:");
    for (const e of p.examples) lines.push(`- ${e.kind} (fault ${e.fault ?? "none"}): ${e.detail}\n  replay: ${e.replay}`);
    lines.push("");
  } else lines.push("No failures: every intended message arrived exactly, with no protocol error and a done for every stream.");
  if (r.strict) {
    const s = r.strict;
    lines.push("");
    lines.push("Without recovery (the same streams in strict mode, i.e. the reference parser's behaviour):");
    lines.push("");
    lines.push("| | resilient (default) | strict (reference) |");
    lines.push("|---|---|---|");
    lines.push(
      `| streams failed | ${p.failed_streams} (${pct(p.failed_streams, p.streams)}%) | ${s.failed_streams} (${pct(s.failed_streams, s.streams)}%) |`,
    );
    lines.push(
      `| streams with a parser error (an HTTP 500 in a typical server) | ${p.failures.protocol_error ?? 0} | ${s.failures.protocol_error ?? 0} |`,
    );
    lines.push(
      `| intended tool calls recovered | ${p.tool_calls.recovered} of ${p.tool_calls.intended} | ${s.tool_calls.recovered} of ${s.tool_calls.intended} |`,
    );
    for (const k of FAILURE_KINDS) {
      if (k === "protocol_error") continue;
      if (p.failures[k] || s.failures[k]) lines.push(`| ${k} | ${p.failures[k] ?? 0} | ${s.failures[k] ?? 0} |`);
    }
  }
  return lines.join("\n");
}
