/**
 * The ops of a ClientFrame as the main thread routes them, whichever form
 * (binary-frame.ts, json-frame.ts) they were read from: each op's kind,
 * stream and ids, and the errors of ops (or whole frames) that could not be
 * used. Errors are data, never thrown.
 */
import { FIELDS } from "./fields.js";

/** An op's kind is its field number in Op's oneof (the binary reader relies on it). */
export const OP_OPEN = FIELDS.Op.open.no;
export const OP_TOKENS = FIELDS.Op.tokens.no;
export const OP_CLOSE = FIELDS.Op.close.no;
export const OP_RENDER = FIELDS.Op.render.no;

export interface OpenOp {
  kind: typeof OP_OPEN;
  stream: string;
  /** The numeric handle asked for (0: none). */
  handle: number;
  role: string;
  mode: string;
  whole_messages: boolean;
  non_strict: boolean;
  format: string;
  reasoning_field: string;
  model: string;
  /** "", "drop" or "parse" (checked by the connection). */
  after_stop: string;
  /** Declared tool names (none: empty). */
  tools: string[];
  /** "", "any", "none" or "one" (checked by the connection). */
  calls: string;
}
export interface TokensOp {
  kind: typeof OP_TOKENS;
  stream: string;
  /** The stream's handle, when it is named by one (0: by name). */
  handle: number;
  /** ids[start, end) of the frame's id array */
  start: number;
  end: number;
}
export interface CloseOp {
  kind: typeof OP_CLOSE;
  stream: string;
  /** The stream's handle, when it is named by one (0: by name). */
  handle: number;
  reason: string;
}
export interface RenderOp {
  kind: typeof OP_RENDER;
  stream: string;
  handle: 0;
  /** The request's JSON text. */
  json: string;
}
export type ClientOp = OpenOp | TokensOp | CloseOp | RenderOp;

export interface OpError {
  code: "bad_frame" | "unknown_op" | "bad_token_id" | "too_many_ids" | "too_deep" | "too_many_ops";
  message: string;
  stream: string;
  /** The handle the op named its stream by, if any. */
  handle?: number;
}

/**
 * The ops of one frame, in order, as parallel arrays: a 256-stream step
 * frame is 256 Tokens ops, and an object per op would be a large share of
 * what the main thread allocates. Tokens ops are a kind, a name or handle
 * and an id range; Open, Close and Render keep their decoded object in
 * `rare`. A reader reuses its list from frame to frame: entries at and
 * past `n` are stale.
 */
export class OpList {
  n = 0;
  kinds = new Uint8Array(64);
  /** The stream's handle (0: named by name); uint32 values. */
  handles = new Uint32Array(64);
  /** Tokens ops: their ids are the frame's ids[start, end). */
  starts = new Uint32Array(64);
  ends = new Uint32Array(64);
  /** The stream's name ("" when none). */
  names: string[] = [];
  /** Open, Close and Render ops as decoded (read only for those kinds). */
  rare: (OpenOp | CloseOp | RenderOp | undefined)[] = [];
  /** The entries of `rare` set since the last clear: let go then, so that no op outlives its frame by long. */
  private rareAt: number[] = [];

  clear(): void {
    this.n = 0;
    if (this.rareAt.length > 0) {
      const rare = this.rare;
      for (const i of this.rareAt) rare[i] = undefined;
      this.rareAt.length = 0;
    }
    // a frame far larger than usual does not keep its arrays (and names) alive
    if (this.kinds.length > 4096) {
      this.kinds = new Uint8Array(64);
      this.handles = new Uint32Array(64);
      this.starts = new Uint32Array(64);
      this.ends = new Uint32Array(64);
      this.names = [];
      this.rare = [];
    }
  }

  private slot(): number {
    const i = this.n++;
    if (i === this.kinds.length) {
      const grow = <T extends Uint8Array | Uint32Array>(a: T): T => {
        const g = new (a.constructor as new (n: number) => T)(a.length * 2);
        g.set(a);
        return g;
      };
      this.kinds = grow(this.kinds);
      this.handles = grow(this.handles);
      this.starts = grow(this.starts);
      this.ends = grow(this.ends);
    }
    return i;
  }

  tokens(stream: string, handle: number, start: number, end: number): void {
    const i = this.slot();
    this.kinds[i] = OP_TOKENS;
    this.handles[i] = handle;
    this.starts[i] = start;
    this.ends[i] = end;
    this.names[i] = stream;
  }

  other(op: OpenOp | CloseOp | RenderOp): void {
    const i = this.slot();
    this.kinds[i] = op.kind;
    this.handles[i] = op.handle;
    this.names[i] = op.stream;
    this.rare[i] = op;
    this.rareAt.push(i);
  }

  /** The ops as objects (tests and tools; the service reads the arrays). */
  toArray(): ClientOp[] {
    const out: ClientOp[] = [];
    for (let i = 0; i < this.n; i++) {
      if (this.kinds[i] === OP_TOKENS) {
        out.push({ kind: OP_TOKENS, stream: this.names[i]!, handle: this.handles[i]!, start: this.starts[i]!, end: this.ends[i]! });
      } else out.push(this.rare[i]!);
    }
    return out;
  }
}

export interface ReadFrame {
  ops: OpList;
  /** The ids of the frame's Tokens ops (each op has its [start, end)); it may run longer than the last op's end. */
  ids: Uint32Array;
  /** Problems with single ops (the rest of the frame stands). */
  errors: readonly OpError[];
  /** Set when the frame as a whole could not be read (nothing in it was used). */
  fatal?: OpError;
}

/** Errors of one code answered one by one in a frame; past this they are counted in one more error. */
export const MAX_ERRORS_PER_CODE = 16;

/** The message of the error that counts a code's errors past MAX_ERRORS_PER_CODE (`n` of them) in a frame. */
export function leftOutMessage(n: number): string {
  return `and ${n} more ops with this error in the frame (only the first ${MAX_ERRORS_PER_CODE} are listed)`;
}

/** The errors of a frame that has none (most frames): shared, so frozen. */
const NO_OP_ERRORS: readonly OpError[] = Object.freeze([]);

/**
 * A frame's op errors, bounded before the answer is built: the first
 * MAX_ERRORS_PER_CODE of each code are kept as they are, the rest are
 * counted and reported in one error of that code at the end. Its list and
 * maps are made at the first error: one per frame read, and most frames
 * have none (two maps a frame would be a large share of what reading a
 * step frame allocates).
 */
export class OpErrors {
  private list: OpError[] | null = null;
  private extra: Map<OpError["code"], number> | null = null;
  private seen: Map<OpError["code"], number> | null = null;

  push(e: OpError): void {
    const seen = (this.seen ??= new Map());
    const n = (seen.get(e.code) ?? 0) + 1;
    seen.set(e.code, n);
    if (n <= MAX_ERRORS_PER_CODE) (this.list ??= []).push(e);
    else {
      const extra = (this.extra ??= new Map());
      extra.set(e.code, (extra.get(e.code) ?? 0) + 1);
    }
  }

  /** The errors to answer with, each code's count of the rest last. */
  done(): readonly OpError[] {
    const list = this.list;
    if (list === null) return NO_OP_ERRORS;
    if (this.extra !== null) {
      for (const [code, n] of this.extra) {
        list.push({ code, message: leftOutMessage(n), stream: "" });
      }
    }
    return list;
  }
}

/** A frame of which nothing is used. */
export function refused(code: OpError["code"], message: string): ReadFrame {
  return { ops: new OpList(), ids: new Uint32Array(0), errors: [], fatal: { code, message, stream: "" } };
}

/** Ids that do not fit uint32 are kept as this (not a token) rather than wrapped. */
export const OUT_OF_RANGE_ID = 0xffffffff;
