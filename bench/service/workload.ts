/**
 * The workloads' data and frames (bench/data/mix-200k.txt, completions primed
 * as assistant), encoded before any timing. Every op is replayed through a
 * local parser as it is encoded, so which frames get an answer, and with how
 * many events, is known beforehand. The service's parser, vocabulary and wire
 * schema are loaded on demand, by the bench only (its echo children never
 * load them).
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { opts } from "./flags.js";
import { LaneSource, Ring } from "./frames.js";
import { log } from "./util.js";

/** The service's own modules the client encodes, replays and decodes with. */
export async function loadModules() {
  const { HarmonyParser } = await import("../../src/core/parser.js");
  const { FLAG_SPECIAL, FLAG_WHOLE, Vocabulary } = await import("../../src/core/vocab.js");
  const { schema } = await import("../../src/protocol/schema.js");
  const { decodeServerFrame } = await import("../../src/protocol/events.js");
  const { loadHarmonyEncoding } = await import("../../src/vocab/index.js");
  return { HarmonyParser, FLAG_SPECIAL, FLAG_WHOLE, Vocabulary, schema, decodeServerFrame, loadHarmonyEncoding };
}

export type Modules = Awaited<ReturnType<typeof loadModules>>;
type Parser = InstanceType<Modules["HarmonyParser"]>;

type Ref = { stream: string } | { handle: number };
export type Op = { open: { stream: string; handle?: number } } | { tokens: Ref & { ids: number[] } } | { close: Ref & { reason: string } };
/** A frame given as ops, with the events its local replay produces and the tokens it carries. */
export interface FrameOps {
  ops: Op[];
  events: number;
  tokens: number;
}

export interface Workload {
  mods: Modules;
  enc: ReturnType<Modules["loadHarmonyEncoding"]>;
  vocab: InstanceType<Modules["Vocabulary"]>;
  /** token ids per completion, primed (<|start|>assistant dropped) */
  completions: Uint32Array[];
  completionTokens: number;
  encode(ops: Op[]): Buffer;
  /** the number of events in an answer frame */
  decodeCount(b: Buffer): number;
}

/** Read the completions; build the vocabulary table and the wire schema. */
export function loadWorkload(mods: Modules): Workload {
  const enc = mods.loadHarmonyEncoding({ shared: true });
  const vocab = new mods.Vocabulary(enc.table);
  const S = mods.schema();
  const DATA = fileURLToPath(new URL("../../../bench/data/mix-200k.txt", import.meta.url));
  const completions = readFileSync(DATA, "utf8")
    .trim()
    .split("\n")
    .map((l) => Uint32Array.from(l.trim().split(/\s+/).map(Number)).subarray(2)); // primed: drop <|start|>assistant
  const completionTokens = completions.reduce((a, c) => a + c.length, 0);
  const encode = (ops: Op[]): Buffer => {
    const u8 = S.ClientFrame.encode({ ops }).finish();
    return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
  };
  const decodeCount = (b: Buffer) => mods.decodeServerFrame(S, b).length;
  return { mods, enc, vocab, completions, completionTokens, encode, decodeCount };
}

/** How tokens and close ops name a stream: by handle with --handles. */
const ref = (name: string, handle: number): Ref => (opts.handles ? { handle } : { stream: name });
const openOp = (name: string, handle: number): Op => ({ open: opts.handles ? { stream: name, handle } : { stream: name } });

/** Assemble a ring from frames given as ops plus their local-replay event counts. */
export function makeRing(w: Workload, frames: FrameOps[]): Ring {
  return new Ring(
    frames.map((f) => w.encode(f.ops)),
    Uint32Array.from(frames.map((f) => f.events)),
    Uint32Array.from(frames.map((f) => f.tokens)),
  );
}

/**
 * (a) step frames: `lanes` streams fed one token per frame. Completion i
 * goes to lane i mod lanes; each lane loops over its completions (a new
 * stream per completion: close the used-up one, open the next, feed its
 * first token, all in one frame). Every chunk is replayed through a local
 * parser to know the events it produces.
 */
export function laneSource(w: Workload, lanes: number): LaneSource {
  const { HarmonyParser } = w.mods;
  const { completions, vocab, encode } = w;
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
}

/**
 * (b) one stream, one content token per frame: open + `<|channel|>final<|message|>`,
 * then `len` whole-text content tokens from the data (each gives one delta),
 * then close; the ring wraps by reopening the same name.
 */
export function singleRing(w: Workload, len: number, name: string, handle: number): Ring {
  const { HarmonyParser, FLAG_SPECIAL, FLAG_WHOLE } = w.mods;
  const { completions, vocab, enc } = w;
  const content: number[] = [];
  for (const c of completions) {
    for (const id of c) if ((vocab.flags[id]! & FLAG_WHOLE) !== 0 && (vocab.flags[id]! & FLAG_SPECIAL) === 0) content.push(id);
    if (content.length >= len) break;
  }
  const p = new HarmonyParser(vocab);
  const header = enc.encode("<|channel|>final<|message|>");
  const frames: FrameOps[] = [];
  frames.push({
    ops: [openOp(name, handle), { tokens: { ...ref(name, handle), ids: header } }],
    events: p.write(header).length,
    tokens: header.length,
  });
  for (const id of content.slice(0, len)) {
    frames.push({ ops: [{ tokens: { ...ref(name, handle), ids: [id] } }], events: p.write([id]).length, tokens: 1 });
  }
  frames.push({ ops: [{ close: { ...ref(name, handle), reason: "eos" } }], events: p.end("eos").length, tokens: 0 });
  return makeRing(w, frames);
}

/** The frames of (a), (b) and (d), and what composing an (a) frame costs. */
export interface Frames {
  srcA: LaneSource;
  ringB: Ring;
  statsA: ReturnType<LaneSource["stats"]>;
  statsB: ReturnType<Ring["stats"]>;
  composeUs: number;
}

/** Build the (a) lanes and the (b) ring; log how long that took since `t0`. */
export function buildFrames(w: Workload, t0: number): Frames {
  const srcA = laneSource(w, opts.streams);
  const ringB = singleRing(w, 2000, "b", opts.streams + 1); // a handle no lane of (a) uses
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
  return { srcA, ringB, statsA, statsB, composeUs };
}
