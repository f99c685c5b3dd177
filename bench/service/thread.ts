/**
 * The service's main thread alone, in process: the service bench's (a)
 * frames (workload.ts's laneSource: --streams streams, one token each per
 * frame, a used-up stream closed and the next opened in the same frame; by
 * handle with --handles) fed straight into a Connection of a Service with no
 * workers, its answers handed to a transport that only counts them. No
 * sockets, no client beside it: a quieter figure than main.ts's (a) for
 * comparing two builds (run it in each checkout in turn), and the thread's
 * cost without the loopback's.
 *
 *   node dist/bench/service/thread.js [--handles] [--streams 256] [--seconds 2] [--runs 5] [--json]
 *   (the service bench's flags, flags.ts; these are the ones it reads)
 *
 * A pass sends FRAMES frames once on a fresh connection and closes it; each
 * figure is the median pass over --seconds × --runs seconds. Baseline in the
 * same run: the same frames decoded only (BinaryFrameReader, the first step
 * of every frame). The warm-up checks that the service answered exactly the
 * frames the lane source's local replay says produce events.
 */
import { pino } from "pino";
import { BinaryFrameReader } from "../../src/protocol/binary-frame.js";
import { schema } from "../../src/protocol/schema.js";
import type { Transport } from "../../src/service/connection.js";
import { DEFAULT_LIMITS, DEFAULTS, Service } from "../../src/service/service.js";
import { opts } from "./flags.js";
import { laneSource, loadModules, loadWorkload } from "./workload.js";

/** Frames per pass. */
const FRAMES = 4000;

// ---------------------------------------------------------------- frames
const lanes = laneSource(loadWorkload(await loadModules()), opts.streams);
const frames: Uint8Array[] = [];
let passTokens = 0;
let answeredFrames = 0;
for (let t = 0; t < FRAMES; t++) {
  const b = lanes.at(t);
  frames.push(new Uint8Array(b.buffer, b.byteOffset, b.byteLength)); // as the WebSocket edge hands frames over
  passTokens += lanes.tokens;
  if (lanes.events > 0) answeredFrames++;
}
const S = schema();

// ---------------------------------------------------------------- the service
const svc = new Service({ ...DEFAULTS, workers: 0, limits: DEFAULT_LIMITS, logger: pino({ level: "silent" }) });
svc.start();
let answers = 0;
let answerBytes = 0;
const transport: Transport = {
  kind: "ws",
  send(frame, done) {
    answers++;
    answerBytes += typeof frame === "string" ? frame.length : frame.byteLength;
    done();
  },
  pause() {},
  resume() {},
  end(code, reason) {
    throw new Error(`the service ended the connection: ${code} ${reason}`);
  },
};

async function servicePass(): Promise<number> {
  const conn = svc.newConnection(transport);
  for (let f = 0; f < frames.length; f++) {
    conn.onFrame(frames[f]!);
    // answers are chained on promises: let them run, as the event loop would between socket reads
    if ((f & 7) === 7) await null;
  }
  await new Promise((r) => setImmediate(r));
  conn.close();
  return passTokens;
}

const reader = new BinaryFrameReader();
let sink = 0;
function decodePass(): number {
  for (const f of frames) sink += reader.read(f, S, DEFAULT_LIMITS.maxIdsPerFrame, DEFAULT_LIMITS.maxOpsPerFrame).ops.n;
  return passTokens;
}

async function measure(pass: () => number | Promise<number>): Promise<{ median: number; passes: number }> {
  for (let i = 0; i < 2; i++) await pass(); // warm-up
  const rates: number[] = [];
  const start = performance.now();
  while (performance.now() - start < opts.seconds * opts.runs * 1000) {
    const t = performance.now();
    const n = await pass();
    rates.push(n / (performance.now() - t) / 1000);
  }
  rates.sort((a, b) => a - b);
  return { median: rates[rates.length >> 1]!, passes: rates.length };
}

const baseline = await measure(decodePass);
answers = 0;
await servicePass();
if (answers !== answeredFrames) throw new Error(`the service answered ${answers} frames of a pass, the replay says ${answeredFrames}`);
answers = 0;
answerBytes = 0;
const service = await measure(servicePass);
await svc.close();
const result = {
  frames: frames.length,
  tokens_per_pass: passTokens,
  service_mtoks: service.median,
  service_passes: service.passes,
  answer_bytes_per_frame: answerBytes / Math.max(1, answers),
  baseline_decode_mtoks: baseline.median,
  sink: sink > 0,
};
if (opts.json) console.log(JSON.stringify(result));
else {
  console.log(`Service main thread, in process (${frames.length} frames of ${opts.streams} streams × 1 token${opts.handles ? ", by handle" : ""}; median of ${service.passes} passes):
| figure | M tokens/s |
|---|---|
| the service's thread (decode, parse, answer) | ${service.median.toFixed(3)} |
| baseline: the frames decoded only | ${baseline.median.toFixed(2)} |
Answer bytes per frame: ${result.answer_bytes_per_frame.toFixed(0)}.`);
}
process.exit(0);
