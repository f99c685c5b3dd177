/**
 * The load generator: one raw `ws` client per run, sending pre-encoded
 * frames closed loop (a window of unanswered frames) or open loop (paced at
 * a rate), matching answers in order and timing each round trip.
 */
import { once } from "node:events";
import type { Histogram } from "hdr-histogram-js";
import WebSocket from "ws";
import type { Source } from "./frames.js";
import { procCpu } from "./probes.js";
import { newHist } from "./stats.js";
import { sleep } from "./util.js";

const MAX_PAYLOAD = 64 * 1024 * 1024;

export async function connect(port: number): Promise<WebSocket> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/stream`, { perMessageDeflate: false, maxPayload: MAX_PAYLOAD });
  await once(ws, "open");
  return ws;
}

export async function closeWs(ws: WebSocket): Promise<void> {
  if (ws.readyState === WebSocket.CLOSED) return;
  const closed = once(ws, "close");
  ws.close(1000, "bench done");
  await Promise.race([closed, sleep(3000)]);
}

// ---------------------------------------------------------------- runners
export interface RunResult {
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
export class Trace {
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

export interface Cursor {
  t: number;
}

export interface RunSpec {
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
export function run(spec: RunSpec): Promise<RunResult> {
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
  const res = newRunResult(hist, histSched);
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
      settle(res, spec.serverPid, start, last, cpu0, ccpu0);
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
      pace(
        spec.rate!,
        start,
        sendOne,
        () => stopping,
        () => {
          if (count === 0) finish();
        },
      );
    }
  });
}

function newRunResult(hist: Histogram, histSched: Histogram | undefined): RunResult {
  return {
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
}

/** A run's duration and the CPU the server (`serverPid`) and this process used over it, from the readings taken at its start. */
function settle(
  res: RunResult,
  serverPid: number | undefined,
  start: number,
  last: number,
  cpu0: { total: number; main: number },
  ccpu0: NodeJS.CpuUsage,
): void {
  res.ms = last - start;
  res.t0 = start;
  res.t1 = last;
  const cpu1 = serverPid ? procCpu(serverPid) : { total: 0, main: 0 };
  res.serverCpu = (cpu1.total - cpu0.total) / (res.ms / 1000);
  res.serverMainCpu = (cpu1.main - cpu0.main) / (res.ms / 1000);
  const cc = process.cpuUsage(ccpu0);
  res.clientCpu = (cc.user + cc.system) / 1000 / res.ms;
}

/**
 * Open loop: frame k is due at start + k / rate. Sends every frame that is
 * due, then sleeps until the next one is; once `stopped()`, calls `stop()`
 * and stops ticking.
 */
function pace(rate: number, start: number, send: (sched: number) => void, stopped: () => boolean, stop: () => void): void {
  const interval = 1000 / rate;
  let next = start;
  const tick = () => {
    const now = performance.now();
    while (!stopped() && next <= now) {
      send(next);
      next += interval;
    }
    if (stopped()) {
      stop();
      return;
    }
    setTimeout(tick, Math.max(0, next - performance.now() - 0.05));
  };
  tick();
}
