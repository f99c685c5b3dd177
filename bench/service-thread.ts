/**
 * The service's main thread alone, in process: the (a) frames of
 * bench/service-bench.ts (256 streams named by handle, one token each per
 * frame, a stream closed and the next opened as its completion runs out) fed
 * straight into a Connection of a Service with no workers, its answers
 * handed to a transport that only counts them. No sockets, no client beside
 * it: a quieter figure than service-bench's (a) for comparing two builds
 * (run it in each checkout in turn), and the thread's cost without the
 * loopback's.
 *
 *   node dist/bench/service-thread.js [--seconds 6] [--frames 4000] [--json]
 *
 * A pass sends every frame once on a fresh connection and closes it; the
 * figure is the median pass. Baseline in the same run: the same frames
 * decoded only (BinaryFrameReader, the first step of every frame).
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { pino } from "pino";
import { BinaryFrameReader } from "../src/protocol/binary-frame.js";
import { schema } from "../src/protocol/schema.js";
import type { Transport } from "../src/service/connection.js";
import { DEFAULT_LIMITS, DEFAULTS, Service } from "../src/service/service.js";

const args = process.argv.slice(2);
const opt = (name: string, def: number): number => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? Number(args[i + 1]) : def;
};
const seconds = opt("seconds", 6);
const frameCount = opt("frames", 4000);
const json = args.includes("--json");
const LANES = 256;

const DATA = fileURLToPath(new URL("../../bench/data/mix-200k.txt", import.meta.url));
const completions = readFileSync(DATA, "utf8")
  .trim()
  .split("\n")
  .map((l) => Uint32Array.from(l.trim().split(/\s+/).map(Number)).subarray(2)); // primed: drop <|start|>assistant

// ---------------------------------------------------------------- frames
type Op =
  | { open: { stream: string; handle: number } }
  | { tokens: { handle: number; ids: number[] } }
  | { close: { handle: number; reason: string } };
const S = schema();
const frames: Uint8Array[] = [];
const frameTokens: number[] = [];
{
  const lanes = Array.from({ length: LANES }, (_, i) => ({ c: i % completions.length, at: 0, handle: i + 1, open: false }));
  let nextHandle = LANES + 1;
  for (let f = 0; f < frameCount; f++) {
    const ops: Op[] = [];
    for (const lane of lanes) {
      const ids = completions[lane.c]!;
      if (!lane.open) {
        ops.push({ open: { stream: `s${lane.handle}`, handle: lane.handle } });
        lane.open = true;
      }
      ops.push({ tokens: { handle: lane.handle, ids: [ids[lane.at]!] } });
      if (++lane.at >= ids.length) {
        ops.push({ close: { handle: lane.handle, reason: "eos" } });
        lane.open = false;
        lane.handle = nextHandle++;
        lane.at = 0;
        lane.c = (lane.c + LANES) % completions.length;
      }
    }
    frames.push(S.ClientFrame.encode({ ops }).finish());
    frameTokens.push(LANES);
  }
}
const passTokens = frameTokens.reduce((a, b) => a + b, 0);

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
  while (performance.now() - start < (seconds * 1000) / 2) {
    const t = performance.now();
    const n = await pass();
    rates.push(n / (performance.now() - t) / 1000);
  }
  rates.sort((a, b) => a - b);
  return { median: rates[rates.length >> 1]!, passes: rates.length };
}

const baseline = await measure(decodePass);
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
if (json) console.log(JSON.stringify(result));
else {
  console.log(`Service main thread, in process (${frames.length} frames of ${LANES} streams × 1 token; median of ${service.passes} passes):
| figure | M tokens/s |
|---|---|
| the service's thread (decode, parse, answer) | ${service.median.toFixed(3)} |
| baseline: the frames decoded only | ${baseline.median.toFixed(2)} |
Answer bytes per frame: ${result.answer_bytes_per_frame.toFixed(0)}.`);
}
process.exit(0);
