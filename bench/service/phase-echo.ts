/**
 * (c) the baselines: the same client frames to a plain `ws` echo server,
 * closed loop and paced at the rate of (d), and paced to a busy echo whose
 * main thread spends as much CPU per frame as the service's did in (d).
 */
import { closeWs, connect } from "./client.js";
import { stopChild, type Child } from "./children.js";
import { startEcho } from "./echo.js";
import { measure, pacedFigure, strip, type PacedFig } from "./figures.js";
import { opts } from "./flags.js";
import type { Report } from "./report.js";
import type { Bench } from "./state.js";
import { log } from "./util.js";

type EchoFigures = NonNullable<Report["c_echo"]>;

export async function echoPhase(b: Bench): Promise<void> {
  const echo = await startEcho();
  log(`echo child pid ${echo.pid} on port ${echo.port}`);
  const c: EchoFigures = {};
  if (b.only.has("a")) await stepFrames(b, echo, c);
  await singleStream(b, echo, c);
  if (b.dRate > 0) {
    c.step_frames_paced = await paced(b, echo, "echo");
    log(`(c) step frames paced at ${b.dRate.toFixed(0)}/s: p99 ${c.step_frames_paced.latency.p99_ms.toFixed(3)} ms`);
  }
  await stopChild(echo);
  await busyEcho(b, c);
  b.results.c_echo = c;
}

/** (a) frames at the best window of (a) (or the last window tried). */
async function stepFrames(b: Bench, echo: Child, c: EchoFigures): Promise<void> {
  const w = b.aBest?.window ?? b.windows[b.windows.length - 1]!;
  const ws = await connect(echo.port);
  const fig = await measure({ ws, src: b.frames.srcA, answerAll: true, cursor: { t: 0 }, window: w, serverPid: echo.pid }, false);
  await closeWs(ws);
  c.step_frames = { window: w, ...strip(fig) };
  log(`(c) step frames, window ${w}: ${fig.frames_per_s.toFixed(0)} frames/s`);
}

/** (b) frames, sequential and pipelined. */
async function singleStream(b: Bench, echo: Child, c: EchoFigures): Promise<void> {
  const { ringB } = b.frames;
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
async function paced(b: Bench, server: Child, traceName: string): Promise<PacedFig> {
  const dRate = b.dRate;
  const ws = await connect(server.port);
  const { fig, slow, sched } = await pacedFigure(
    { ws, src: b.frames.srcA, answerAll: true, cursor: { t: 0 }, rate: dRate, serverPid: server.pid },
    traceName,
    "the echo server",
  );
  await closeWs(ws);
  return { frames_per_s_target: dRate, ...strip(fig), slow, sched };
}

/**
 * The same pace to an echo whose main thread spends as much CPU per frame
 * as the service's did in (d) (its own echoing plus a spin for the rest):
 * what that load costs the p99 on this machine, parsing aside. The spin
 * reads the process's CPU time, of which the echo's other threads use
 * little. Only when (d) ran and the service spent more than the echo.
 */
async function busyEcho(b: Bench, c: EchoFigures): Promise<void> {
  const { dRate, dCpuUs } = b;
  const echoCpuUs = c.step_frames_paced ? (c.step_frames_paced.server_main_cpu * 1e6) / c.step_frames_paced.frames_per_s : 0;
  if (!(dRate > 0 && dCpuUs > echoCpuUs)) return;
  const work = Math.round(dCpuUs - echoCpuUs);
  const busy = await startEcho(work);
  const fig = await paced(b, busy, "busy_echo");
  await stopChild(busy);
  c.step_frames_paced_busy = { work_us: work, ...fig };
  log(
    `(c) step frames paced at ${dRate.toFixed(0)}/s to an echo spinning ${work} µs of CPU per frame: p99 ${fig.latency.p99_ms.toFixed(3)} ms`,
  );
}
