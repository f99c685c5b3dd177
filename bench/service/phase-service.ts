/**
 * The service's workloads, on one service child: (a) step frames at each
 * window, (b) one stream sequential and pipelined, (d) (a) paced; then its
 * metrics, logs and (--cpu-prof) profiles.
 */
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { closeWs, connect, run } from "./client.js";
import { layoutOf, startService, stopChild, type Child } from "./children.js";
import { measure, pacedFigure, strip, traceLines, type Figure } from "./figures.js";
import { opts } from "./flags.js";
import { gcEvents, serviceGcSpans, summariseGc, type GcEvent } from "./gc.js";
import { fetchMetrics, frameTimeShares, vmRssBytes } from "./probes.js";
import { summariseProfiles } from "./profiles.js";
import type { Bench } from "./state.js";
import { log, sleep } from "./util.js";

export async function servicePhase(b: Bench): Promise<void> {
  const profDir = profileDir();
  const srv = await startService(opts.workers, profDir);
  b.layout = layoutOf(srv);
  log(`service child pid ${srv.pid} on port ${srv.port} (${b.layout})`);
  await warmUp(b, srv);
  if (b.only.has("a")) await stepFrames(b, srv);
  if (b.only.has("b")) await singleStream(b, srv);
  if (b.only.has("d")) await paced(b, srv);
  await finish(b, srv, profDir);
}

/** --cpu-prof: the (empty) directory the service child writes its profiles to. */
function profileDir(): string | undefined {
  let profDir: string | undefined;
  if (opts.cpuProf) {
    profDir = path.resolve(opts.cpuProf);
    mkdirSync(profDir, { recursive: true });
    for (const f of readdirSync(profDir))
      if (f.endsWith(".cpuprofile")) throw new Error(`${profDir} already holds profiles; use an empty directory`);
  }
  return profDir;
}

/** JIT warm-up of the fresh service (the first seconds run far slower). */
async function warmUp(b: Bench, srv: Child): Promise<void> {
  const { srcA, ringB } = b.frames;
  const ws = await connect(srv.port);
  await run({ ws, src: srcA, cursor: { t: 0 }, window: 4, ms: opts.serverWarmup * 750 });
  await run({ ws, src: ringB, cursor: { t: 0 }, window: 1, ms: opts.serverWarmup * 250 });
  await closeWs(ws);
}

/** (a) at each window; the best one sets the pace of (d) and the echo's window. */
async function stepFrames(b: Bench, srv: Child): Promise<void> {
  const { srcA, statsA, composeUs } = b.frames;
  const decodeCount = b.w.decodeCount;
  const perWindow: Record<string, Figure> = {};
  for (const w of b.windows) {
    const ws = await connect(srv.port);
    const fig = await measure({ ws, src: srcA, cursor: { t: 0 }, window: w, serverPid: srv.pid, decode: decodeCount }, w === b.windows[0]);
    await closeWs(ws);
    perWindow[w] = fig;
    log(
      `(a) window ${w}: ${(fig.tokens_per_s / 1e3).toFixed(0)}k tokens/s, ${fig.frames_per_s.toFixed(0)} frames/s, p99 ${fig.latency.p99_ms.toFixed(2)} ms`,
    );
    if (fig.warmup_mismatches.length > 0) log(`(a) answer mismatches: ${fig.warmup_mismatches.join("; ")}`);
    if (!b.aBest || fig.tokens_per_s > b.aBest.fig.tokens_per_s) b.aBest = { window: w, fig };
  }
  b.results.a_step_frames = {
    streams: opts.streams,
    frames: { ...statsA, compose_us_per_frame: composeUs },
    best_window: b.aBest!.window,
    windows: strip(perWindow),
  };
}

/** (b) one stream, sequential (window 1) and pipelined (--pipeline). */
async function singleStream(b: Bench, srv: Child): Promise<void> {
  const { ringB, statsB } = b.frames;
  const decodeCount = b.w.decodeCount;
  let ws = await connect(srv.port);
  const seq = await measure({ ws, src: ringB, cursor: { t: 0 }, window: 1, serverPid: srv.pid, decode: decodeCount }, true);
  await closeWs(ws);
  log(
    `(b) sequential: ${seq.frames_per_s.toFixed(0)} frames/s, p50 ${seq.latency.p50_ms.toFixed(3)} ms, p99 ${seq.latency.p99_ms.toFixed(3)} ms`,
  );
  ws = await connect(srv.port);
  const pipe = await measure({ ws, src: ringB, cursor: { t: 0 }, window: opts.pipeline, serverPid: srv.pid, decode: decodeCount }, false);
  await closeWs(ws);
  log(`(b) pipelined (window ${opts.pipeline}): ${pipe.frames_per_s.toFixed(0)} frames/s, p50 ${pipe.latency.p50_ms.toFixed(3)} ms`);
  b.results.b_single_stream = { ring: statsB, sequential: strip(seq), pipelined: { window: opts.pipeline, ...strip(pipe) } };
}

/**
 * (d) (a) paced at --load of the best of (a), or at --rate; right after the
 * timed runs, the service's GC lines, its frame time histogram and its RSS.
 */
async function paced(b: Bench, srv: Child): Promise<void> {
  b.dRate = opts.rate ?? opts.load * b.aBest!.fig.frames_per_s;
  const dRate = b.dRate;
  const ws = await connect(srv.port);
  const m0 = await fetchMetrics(srv.port);
  const dFrom = performance.now();
  let gcs: GcEvent[] = [];
  let frameTime: ReturnType<typeof frameTimeShares> = { frames: 0, within: [] };
  let rssAfter = 0;
  let dTo = 0;
  const { fig, slow, sched } = await pacedFigure(
    { ws, src: b.frames.srcA, cursor: { t: 0 }, rate: dRate, serverPid: srv.pid },
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
  if (opts.childOutput) log(`(d) ran from ${dFrom.toFixed(0)} to ${dTo.toFixed(0)} ms on the client's clock (service child ${srv.pid})`);
  log(`(d) paced at ${dRate.toFixed(0)} frames/s: p50 ${fig.latency.p50_ms.toFixed(3)} ms, p99 ${fig.latency.p99_ms.toFixed(3)} ms`);
  b.results.d_paced = {
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
  b.dCpuUs = (fig.server_main_cpu * 1e6) / fig.frames_per_s;
}

/** The service's metrics once every connection closed, then stop it; its logs, --trace output and --cpu-prof profiles. */
async function finish(b: Bench, srv: Child, profDir: string | undefined): Promise<void> {
  await sleep(300);
  const metrics = await fetchMetrics(srv.port);
  await stopChild(srv);
  b.results.service_checks = {
    metrics_after_all_connections_closed: metrics,
    warn_log_lines: srv.warnLines.length,
    warn_log_sample: srv.warnLines.slice(0, 3),
    stderr: srv.stderr.slice(0, 5),
  };
  if (opts.trace && srv.other.length > 0)
    writeFileSync(`${opts.trace}.server.txt`, srv.other.map((o) => `${o.at.toFixed(1)} ${o.line}`).join("\n") + "\n");
  if (profDir) {
    await sleep(500);
    b.results.cpu_profiles = summariseProfiles(profDir, 15);
  }
}
