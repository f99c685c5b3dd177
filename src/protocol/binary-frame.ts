/**
 * Reading binary ClientFrames (proto/harmony/v1/harmony.proto) on the main
 * thread.
 *
 * The main thread only routes: it needs each op's kind, stream and ids, not
 * protobufjs message objects, so the binary form is read by a small wire
 * reader that follows the schema's field numbers (fields.ts; Tokens ids,
 * packed or not, land in one Uint32Array per frame). Render ops are rare and
 * are decoded with protobufjs.
 *
 * Like `ws`'s receiver: limits are checked as early as possible, and errors
 * are returned as data, never thrown.
 */
import { LIMIT_DEFAULTS } from "../core/defaults.js";
import { FIELDS, Wire } from "./fields.js";
import {
  OpErrors,
  OP_CLOSE,
  OP_OPEN,
  OP_RENDER,
  OpList,
  refused,
  type CloseOp,
  type OpError,
  type OpenOp,
  type ReadFrame,
  type RenderOp,
} from "./ops.js";
import type { Schema } from "./schema.js";
import { decodeString, IdSink, packedCount, Reader, readPacked, WireError } from "./wire.js";

// the field numbers and wire types of Open and Close, as plain numbers (readBinary keeps its own in locals)
const VARINT = Wire.VARINT;
const LEN = Wire.LEN;
const { Open, Close } = FIELDS;
const OPEN_STREAM = Open.stream.no;
const OPEN_ROLE = Open.role.no;
const OPEN_MODE = Open.mode.no;
const OPEN_WHOLE_MESSAGES = Open.whole_messages.no;
const OPEN_NON_STRICT = Open.non_strict.no;
const OPEN_FORMAT = Open.format.no;
const OPEN_REASONING_FIELD = Open.reasoning_field.no;
const OPEN_MODEL = Open.model.no;
const OPEN_HANDLE = Open.handle.no;
const OPEN_AFTER_STOP = Open.after_stop.no;
const OPEN_TOOLS = Open.tools.no;
const OPEN_CALLS = Open.calls.no;
const CLOSE_STREAM = Close.stream.no;
const CLOSE_REASON = Close.reason.no;
const CLOSE_HANDLE = Close.handle.no;

/** A stream handle read from the wire; one past uint32 makes the frame undecodable. */
function fitHandle(v: number): number {
  if (v > 0xffffffff) throw new WireError("a handle does not fit uint32");
  return v;
}

/** The tools of an open that declares none (frozen: shared by every such open). */
const NO_TOOLS = Object.freeze([]) as unknown as string[];

/** The message of an op dropped for a string field that is not UTF-8. */
const NOT_UTF8 = "has a string field that is not valid UTF-8";

/** A string field at `r.pos` (its tag read); null when it is not valid UTF-8. */
function readStr(r: Reader, buf: Uint8Array, names: Map<number, string> | null): string | null {
  const len = r.length();
  const s = r.pos;
  r.pos = s + len;
  return names ? internName(buf, s, s + len, names) : decodeString(buf, s, s + len);
}

/*
 * Open and Close are read here rather than by protobufjs: a step frame
 * closes and opens streams as sequences finish, and protobufjs built three
 * objects per op (message, plain object, op). Field values that recur (the
 * name, "assistant", "eos") come back as the same strings. As protobuf
 * does, the last of a repeated field wins, and a known field with another
 * wire type is skipped like an unknown one. An op with a string that is not
 * UTF-8 is dropped with an error of its own (the rest of the frame stands).
 * Tests compare with protobufjs.
 */

function readOpen(r: Reader, buf: Uint8Array, names: Map<number, string> | null): OpenOp | OpError {
  let stream = "";
  let role = "";
  let mode = "";
  let format = "";
  let reasoningField = "";
  let model = "";
  let whole = false;
  let nonStrict = false;
  let handle = 0;
  let afterStop = "";
  let calls = "";
  let tools: string[] | null = null;
  let bad = false;
  while (r.pos < r.end) {
    const t = r.varint();
    const f = t >>> 3;
    const w = t & 7;
    if (
      w === LEN &&
      (f === OPEN_STREAM ||
        f === OPEN_ROLE ||
        f === OPEN_MODE ||
        f === OPEN_FORMAT ||
        f === OPEN_REASONING_FIELD ||
        f === OPEN_MODEL ||
        f === OPEN_AFTER_STOP ||
        f === OPEN_TOOLS ||
        f === OPEN_CALLS)
    ) {
      const v = readStr(r, buf, names);
      if (v === null) bad = true;
      else if (f === OPEN_STREAM) stream = v;
      else if (f === OPEN_ROLE) role = v;
      else if (f === OPEN_MODE) mode = v;
      else if (f === OPEN_FORMAT) format = v;
      else if (f === OPEN_REASONING_FIELD) reasoningField = v;
      else if (f === OPEN_AFTER_STOP) afterStop = v;
      else if (f === OPEN_TOOLS) (tools ??= []).push(v);
      else if (f === OPEN_CALLS) calls = v;
      else model = v;
    } else if (w === VARINT && (f === OPEN_WHOLE_MESSAGES || f === OPEN_NON_STRICT || f === OPEN_HANDLE)) {
      const v = r.varint();
      if (f === OPEN_WHOLE_MESSAGES) whole = v !== 0;
      else if (f === OPEN_NON_STRICT) nonStrict = v !== 0;
      else handle = fitHandle(v);
    } else r.skip(w);
  }
  if (bad) return { code: "bad_frame", message: `an open ${NOT_UTF8}`, stream, handle };
  return {
    kind: OP_OPEN,
    stream,
    handle,
    role,
    mode,
    whole_messages: whole,
    non_strict: nonStrict,
    format,
    reasoning_field: reasoningField,
    model,
    after_stop: afterStop,
    // most opens declare no tools: one frozen empty list for all of them (a step frame opens many)
    tools: tools ?? NO_TOOLS,
    calls,
  };
}

function readClose(r: Reader, buf: Uint8Array, names: Map<number, string> | null): CloseOp | OpError {
  let stream = "";
  let reason = "";
  let handle = 0;
  let bad = false;
  while (r.pos < r.end) {
    const t = r.varint();
    const f = t >>> 3;
    const w = t & 7;
    if (w === LEN && (f === CLOSE_STREAM || f === CLOSE_REASON)) {
      const v = readStr(r, buf, names);
      if (v === null) bad = true;
      else if (f === CLOSE_STREAM) stream = v;
      else reason = v;
    } else if (w === VARINT && f === CLOSE_HANDLE) handle = fitHandle(r.varint());
    else r.skip(w);
  }
  if (bad) return { code: "bad_frame", message: `a close ${NOT_UTF8}`, stream, handle };
  return { kind: OP_CLOSE, stream, handle, reason };
}

/** Render ops: rare, decoded by protobufjs. */
function decodeRender(payload: Uint8Array, s: Schema): RenderOp {
  const m = s.Render.toObject(s.Render.decode(payload), { defaults: true }) as { request_id: string; request_json: string };
  return { kind: OP_RENDER, stream: m.request_id, handle: 0, json: m.request_json };
}

/**
 * Reads binary ClientFrames one after another, reusing its readers and its
 * id array: the `ids` of a result are valid until the next `read` (a
 * connection uses them before it reads its next frame).
 */
export class BinaryFrameReader {
  private readonly frame = new Reader(EMPTY, 0, 0);
  private readonly op = new Reader(EMPTY, 0, 0);
  private readonly r = new Reader(EMPTY, 0, 0);
  private readonly sink = new IdSink(64);
  private readonly ops = new OpList();
  /** Stream names and the short string fields of Open and Close seen, by a hash of their bytes. */
  private readonly names = new Map<number, string>();

  /** Names remembered now (at most {@link MAX_NAMES}). */
  get cachedNames(): number {
    return this.names.size;
  }

  /** Read a binary ClientFrame. `maxIds` bounds the ids of the whole frame. */
  read(buf: Uint8Array, s: Schema, maxIds: number, maxOps: number = LIMIT_DEFAULTS.maxOpsPerFrame): ReadFrame {
    this.sink.n = 0;
    this.ops.clear();
    const r = readBinary(
      buf,
      s,
      maxIds,
      maxOps,
      this.sink,
      this.ops,
      this.frame.reset(buf),
      this.op.reset(buf),
      this.r.reset(buf),
      this.names,
    );
    // a frame far larger than usual does not keep its id array alive
    if (this.sink.ids.length > 65536) this.sink.ids = new Uint32Array(64);
    return r;
  }
}

const EMPTY = new Uint8Array(0);

/**
 * Names remembered per reader (one per connection) before it starts over: a
 * client that names many streams (or names streams that do not exist, each
 * refused) holds at most 4096 names of at most 32 bytes here, well under
 * 1 MiB (docs/security.md); one that cycles more streams than that only
 * loses the speed-up.
 */
export const MAX_NAMES = 4096;

/**
 * The stream name of a Tokens op, as the same string object each time it
 * recurs: a frame for 256 streams names each of them again, and decoding a
 * fresh string (then hashing it for the stream map) cost about as much as
 * parsing its token. Short ASCII names are looked up by an FNV-1a hash of
 * their bytes and checked byte for byte; anything else is decoded (null
 * when not valid UTF-8).
 */
function internName(buf: Uint8Array, s: number, e: number, names: Map<number, string>): string | null {
  const len = e - s;
  if (len > 32) return decodeString(buf, s, e);
  let h = 0x811c9dc5;
  for (let i = s; i < e; i++) h = Math.imul(h ^ buf[i]!, 0x01000193);
  const hit = names.get(h);
  if (hit !== undefined && hit.length === len) {
    let i = 0;
    while (i < len && hit.charCodeAt(i) === buf[s + i]) i++;
    if (i === len) return hit;
  }
  const str = decodeString(buf, s, e);
  // one char per byte (ASCII) is what the check above can confirm
  if (str !== null && str.length === len) {
    if (names.size >= MAX_NAMES) names.clear();
    names.set(h, str);
  }
  return str;
}

/** Read one binary ClientFrame with fresh buffers. `maxIds` bounds the ids of the whole frame. */
export function readBinaryFrame(buf: Uint8Array, s: Schema, maxIds: number, maxOps: number = LIMIT_DEFAULTS.maxOpsPerFrame): ReadFrame {
  return readBinary(
    buf,
    s,
    maxIds,
    maxOps,
    new IdSink(buf.length),
    new OpList(),
    new Reader(buf, 0, buf.length),
    new Reader(buf, 0, 0),
    new Reader(buf, 0, 0),
    null,
  );
}

function readBinary(
  buf: Uint8Array,
  s: Schema,
  maxIds: number,
  maxOps: number,
  sink: IdSink,
  ops: OpList,
  frame: Reader,
  op: Reader,
  r: Reader,
  names: Map<number, string> | null,
): ReadFrame {
  // the numbers the loops compare with, in locals: a module's constants, and
  // more so imported ones, are loaded (and checked) at each use, a
  // measurable share of reading a step frame. An op's kind is its field number.
  const lenWire = Wire.LEN;
  const varintWire = Wire.VARINT;
  const opsNo = FIELDS.ClientFrame.ops.no;
  const openNo = FIELDS.Op.open.no;
  const tokensNo = FIELDS.Op.tokens.no;
  const closeNo = FIELDS.Op.close.no;
  const renderNo = FIELDS.Op.render.no;
  const streamNo = FIELDS.Tokens.stream.no;
  const idsNo = FIELDS.Tokens.ids.no;
  const handleNo = FIELDS.Tokens.handle.no;
  const errors = new OpErrors();
  let opCount = 0;
  try {
    while (frame.pos < frame.end) {
      const tag = frame.varint();
      if (tag >>> 3 !== opsNo || (tag & 7) !== lenWire) {
        frame.skip(tag & 7); // unknown ClientFrame field: ignored, as protobuf does
        continue;
      }
      if (++opCount > maxOps) return refused("too_many_ops", `the frame carries more than ${maxOps} ops`);
      const olen = frame.length();
      op.at(frame.pos, frame.pos + olen);
      frame.pos += olen;
      let kind = 0;
      let ps = 0;
      let pe = 0;
      while (op.pos < op.end) {
        const t = op.varint();
        const f = t >>> 3;
        if ((f === openNo || f === tokensNo || f === closeNo || f === renderNo) && (t & 7) === lenWire) {
          kind = f; // oneof: the last one set wins
          const len = op.length();
          ps = op.pos;
          pe = op.pos += len;
        } else op.skip(t & 7);
      }
      if (kind === 0) {
        errors.push({ code: "unknown_op", message: "an op with no open, tokens, close or render", stream: "" });
        continue;
      }
      if (kind === openNo || kind === closeNo) {
        const o = kind === openNo ? readOpen(r.at(ps, pe), buf, names) : readClose(r.at(ps, pe), buf, names);
        if ("kind" in o) ops.other(o);
        else errors.push(o);
      } else if (kind === renderNo) ops.other(decodeRender(buf.subarray(ps, pe), s));
      else {
        r.at(ps, pe);
        let stream = "";
        let handle = 0;
        let bad = false;
        const start = sink.n;
        while (r.pos < r.end) {
          const t = r.varint();
          const f = t >>> 3;
          const w = t & 7;
          if (f === streamNo && w === lenWire) {
            const v = readStr(r, buf, names);
            if (v === null) bad = true;
            else stream = v;
          } else if (f === idsNo && w === lenWire) {
            const len = r.length();
            const ie = r.pos + len;
            if (sink.n + len > maxIds && sink.n + packedCount(buf, r.pos, ie) > maxIds) {
              return refused("too_many_ids", `the frame carries more than ${maxIds} token ids`);
            }
            r.pos = readPacked(buf, r.pos, ie, sink);
          } else if (f === idsNo && w === varintWire) sink.push(r.varint());
          else if (f === handleNo && w === varintWire) handle = fitHandle(r.varint());
          else r.skip(w);
          if (sink.n > maxIds) return refused("too_many_ids", `the frame carries more than ${maxIds} token ids`);
        }
        if (bad) {
          // the op's ids are not used
          sink.n = start;
          errors.push({ code: "bad_frame", message: `a tokens op ${NOT_UTF8}`, stream, handle });
        } else ops.tokens(stream, handle, start, sink.n);
      }
    }
  } catch (e) {
    return refused("bad_frame", e instanceof WireError ? e.message : `undecodable frame: ${(e as Error).message}`);
  }
  return { ops, ids: sink.ids, errors: errors.done() };
}
