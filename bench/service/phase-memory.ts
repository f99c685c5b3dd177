/**
 * (e) memory per open stream: --mem-streams streams opened --mem-depth
 * tokens deep on a service child, its RSS sampled as they open, after the
 * connection closes and after --mem-cycles more cycles (a leak check); then
 * the same streams on a service in this process, its heap and external
 * memory measured after forced GCs.
 */
import type WebSocket from "ws";
import { closeWs, connect, run } from "./client.js";
import { layoutOf, startService, stopChild, type Child } from "./children.js";
import type { Ring } from "./frames.js";
import { opts } from "./flags.js";
import { fetchMetrics, vmRssBytes } from "./probes.js";
import type { Bench } from "./state.js";
import { median } from "./stats.js";
import { sleep } from "./util.js";
import { makeRing, type FrameOps, type Op, type Workload } from "./workload.js";

/** The frames of (e): a warm-up ring (open and close one frame's worth), and the frames that open all N streams. */
interface MemoryFrames {
  N: number;
  K: number;
  PER: number;
  warm: Ring;
  open: Ring;
}

export async function memoryPhase(b: Bench) {
  const { N, K, PER, warm, open } = memoryFrames(b.w);
  const mismatches: string[] = [];
  const rss = await serviceRss(b, { N, K, PER, warm, open }, mismatches);
  const { h0, h1, h2 } = await inProcessHeld(b, open, mismatches);
  return {
    streams: N,
    tokens_per_stream: K,
    per_frame: PER,
    open_frames: open.frames.length,
    rss_start_bytes: rss.rssStart,
    rss_baseline_bytes: rss.rss0,
    rss_points: rss.points.map(([n, bytes]) => ({ streams: n, rss_bytes: bytes })),
    rss_full_bytes: rss.rssFull,
    rss_after_close_bytes: rss.rssClosed,
    rss_after_more_cycles_bytes: rss.rssCycles,
    bytes_per_stream: (rss.rssFull - rss.rss0) / N,
    bytes_per_stream_slope: rss.slope,
    open_streams_metric_full: rss.mFull["harmony_open_streams"],
    open_streams_metric_after_close: rss.mClosed["harmony_open_streams"],
    in_process_bytes_per_stream: (h1.total - h0.total) / N,
    in_process_heap_bytes_per_stream: (h1.heap - h0.heap) / N,
    in_process_bytes_after_close: h2.total - h0.total,
    mismatches,
    warn_log_lines: rss.warnLogLines,
  };
}

function memoryFrames(w: Workload): MemoryFrames {
  const { HarmonyParser } = w.mods;
  const { completions, vocab } = w;
  const N = opts.memStreams;
  const K = opts.memDepth; // tokens fed to each stream (8: a header and a few content tokens)
  const PER = Math.max(1, Math.min(500, Math.floor(200_000 / K))); // streams per frame, under the ids-per-frame limit
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
  const warm = makeRing(w, [frame(warmNames, 0), closeFrame(warmNames, 0)]);
  const openFrames: FrameOps[] = [];
  for (let at = 0; at < N; at += PER) openFrames.push(frame(names("m", at, Math.min(PER, N - at)), at));
  const open = makeRing(w, openFrames);
  return { N, K, PER, warm, open };
}

/** The service child's RSS (VmRSS): the median of 5 samples, after 0.7 s for it to settle. */
async function sampleRss(srv: Child): Promise<number> {
  await sleep(700);
  const xs: number[] = [];
  for (let i = 0; i < 5; i++) {
    xs.push(vmRssBytes(srv.pid));
    await sleep(100);
  }
  return median(xs);
}

/** The streams on a service child, by its RSS: as they open, once their connection closed, after the leak check's cycles. */
async function serviceRss(b: Bench, f: MemoryFrames, mismatches: string[]) {
  const { N, PER, warm, open } = f;
  const decodeCount = b.w.decodeCount;
  const srv = await startService(opts.workers);
  if (b.layout === "not started") b.layout = layoutOf(srv);
  const ws = await connect(srv.port);
  const rssStart = vmRssBytes(srv.pid);
  for (let i = 0; i < 4; i++) {
    const r = await run({ ws, src: warm, cursor: { t: 0 }, window: 1, maxFrames: 2, verify: true, decode: decodeCount });
    mismatches.push(...r.mismatches);
  }
  const rss0 = await sampleRss(srv);
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
    points.push([Math.min(N, sent * PER), await sampleRss(srv)]);
  }
  const rssFull = points[points.length - 1]![1];
  const slope = leastSquaresSlope(points);
  const mFull = await fetchMetrics(srv.port);
  await closeWs(ws);
  const rssClosed = await sampleRss(srv);
  await sleep(500);
  const mClosed = await fetchMetrics(srv.port);
  const rssCycles = await leakCycles(srv, open, mismatches);
  await stopChild(srv);
  return { rssStart, rss0, points, rssFull, slope, mFull, rssClosed, mClosed, rssCycles, warnLogLines: srv.warnLines.length };
}

function leastSquaresSlope(points: [number, number][]): number {
  const mx = points.reduce((a, p) => a + p[0], 0) / points.length;
  const my = points.reduce((a, p) => a + p[1], 0) / points.length;
  return points.reduce((a, p) => a + (p[0] - mx) * (p[1] - my), 0) / points.reduce((a, p) => a + (p[0] - mx) ** 2, 0);
}

/** Leak check: --mem-cycles more cycles of open all on a new connection, then disconnect; the RSS after each. */
async function leakCycles(srv: Child, open: Ring, mismatches: string[]): Promise<number[]> {
  const rssCycles: number[] = [];
  for (let cycle = 0; cycle < opts.memCycles; cycle++) {
    const ws2 = await connect(srv.port);
    const r = await run({ ws: ws2, src: open, cursor: { t: 0 }, window: 4, maxFrames: open.frames.length });
    mismatches.push(...r.mismatches);
    await closeWs(ws2);
    rssCycles.push(await sampleRss(srv));
  }
  return rssCycles;
}

/**
 * The same streams on a service in this process (no worker threads, so
 * every stream's state is on this heap), measured after forced GCs: the
 * state an open stream holds, without the garbage RSS also counts. h0
 * before the measured cycle, h1 with its streams open, h2 once closed.
 */
async function inProcessHeld(b: Bench, open: Ring, mismatches: string[]) {
  const { gc } = b;
  const decodeCount = b.w.decodeCount;
  const { DEFAULT_LIMITS } = await import("../../src/service/service.js");
  const { Server } = await import("../../src/server.js");
  const { pino } = await import("pino");
  const local = new Server({
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
  return { h0, h1, h2 };
}
