/**
 * Client frames prepared before any timing: a ring of pre-encoded frames
 * replayed in a loop, and step frames composed for many lanes from
 * pre-encoded per-lane chunks (the client does no protobuf work while timing).
 */

/** Pre-encoded client frames by step number t = 0, 1, 2, ... */
export interface Source {
  /** The frame of step t; sets `events` and `tokens` for it. */
  at(t: number): Buffer;
  /** events the last frame produces (local replay); 0: it gets no answer frame */
  events: number;
  tokens: number;
}

/** A fixed list of frames replayed in a loop (it must wrap cleanly). */
export class Ring implements Source {
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
export class LaneSource implements Source {
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
