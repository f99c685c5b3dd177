/**
 * Reading ClientFrames (proto/harmony/v1/harmony.proto) on the main thread.
 *
 * The main thread only routes: it needs each op's kind, stream and ids, not
 * protobufjs message objects, so the binary form is read by a small wire
 * reader that follows the schema's field numbers (Tokens ids, packed or not,
 * land in one Uint32Array per frame). Open and Close are rare and are
 * decoded with protobufjs. The JSON form (text frames) is validated by hand
 * so that every mistake gets a precise message.
 *
 * Like `ws`'s receiver: limits are checked as early as possible, and errors
 * are returned as data, never thrown.
 */
import type { Schema } from "./schema.js";

export const OP_OPEN = 1;
export const OP_TOKENS = 2;
export const OP_CLOSE = 3;
export const OP_RENDER = 4;

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
  code: "bad_frame" | "unknown_op" | "bad_token_id" | "too_many_ids";
  message: string;
  stream: string;
  /** The handle the op named its stream by, if any. */
  handle?: number;
}

/**
 * The ops of one frame, in order, as parallel arrays: a 256-stream step
 * frame is 256 Tokens ops, and an object per op was half of what the main
 * thread allocated. Tokens ops are a kind, a name or handle and an id range;
 * Open, Close and Render keep their decoded object in `rare`. A reader
 * reuses its list from frame to frame: entries at and past `n` are stale.
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
    const rare = this.rare;
    for (const i of this.rareAt) rare[i] = undefined;
    this.rareAt.length = 0;
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
  errors: OpError[];
  /** Set when the frame as a whole could not be read (nothing in it was used). */
  fatal?: OpError;
}

/** A frame of which nothing is used. */
function refused(code: OpError["code"], message: string): ReadFrame {
  return { ops: new OpList(), ids: new Uint32Array(0), errors: [], fatal: { code, message, stream: "" } };
}

/** Ids that do not fit uint32 are kept as this (not a token) rather than wrapped. */
export const OUT_OF_RANGE_ID = 0xffffffff;

// ignoreBOM: a leading U+FEFF is part of the string, as protobuf and JSON keep it
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

class WireError extends Error {}

/**
 * A UTF-8 string field; null when it is not valid UTF-8. Stream names are
 * short and almost always ASCII: those are built directly (a TextDecoder
 * call costs more than the name).
 */
function decodeString(buf: Uint8Array, s: number, e: number): string | null {
  if (e - s <= 32) {
    let out = "";
    let i = s;
    for (; i < e; i++) {
      const b = buf[i]!;
      if (b >= 0x80) break;
      out += String.fromCharCode(b);
    }
    if (i === e) return out;
  }
  try {
    return utf8.decode(buf.subarray(s, e));
  } catch {
    return null;
  }
}

/** Minimal protobuf wire reader over one buffer. */
class Reader {
  pos: number;
  constructor(
    public buf: Uint8Array,
    start: number,
    public end: number,
  ) {
    this.pos = start;
  }

  /** Read another buffer from the start (readers are reused across frames). */
  reset(buf: Uint8Array): this {
    this.buf = buf;
    this.pos = 0;
    this.end = buf.length;
    return this;
  }

  varint(): number {
    // values up to 2^53 are exact; larger ones only matter as "too large"
    let result = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new WireError("truncated varint");
      const b = this.buf[this.pos++]!;
      result += (b & 0x7f) * mul;
      if (b < 0x80) return result;
      mul *= 128;
    }
    throw new WireError("varint longer than 10 bytes");
  }

  /** Read from [start, end) of the same buffer now (readers are reused within a frame). */
  at(start: number, end: number): this {
    this.pos = start;
    this.end = end;
    return this;
  }

  /** A length-delimited field's payload length; it starts at `pos` (checked to fit). */
  length(): number {
    const len = this.varint();
    if (len > this.end - this.pos) throw new WireError("length-delimited field runs past its parent");
    return len;
  }

  /** Returns [start, end) of a length-delimited field's payload. */
  bytes(): [number, number] {
    const len = this.varint();
    const start = this.pos;
    if (len > this.end - start) throw new WireError("length-delimited field runs past its parent");
    this.pos = start + len;
    return [start, start + len];
  }

  skip(wireType: number): void {
    switch (wireType) {
      case 0:
        this.varint();
        return;
      case 1:
        this.pos += 8;
        break;
      case 2:
        this.bytes();
        return;
      case 5:
        this.pos += 4;
        break;
      default:
        throw new WireError(`unsupported wire type ${wireType}`);
    }
    if (this.pos > this.end) throw new WireError("truncated fixed-width field");
  }
}

/** Varints in a packed field (each ends with a byte below 0x80). */
function packedCount(buf: Uint8Array, s: number, e: number): number {
  let n = 0;
  for (let i = s; i < e; i++) if (buf[i]! < 0x80) n++;
  return n;
}

/** Read a packed repeated uint32 field's varints into the sink; returns the end. */
function readPacked(buf: Uint8Array, s: number, e: number, sink: IdSink): number {
  let i = s;
  while (i < e) {
    const b = buf[i++]!;
    if (b < 0x80) {
      sink.push(b); // one-byte ids, and the fast path for the rest
      continue;
    }
    let result = b & 0x7f;
    let mul = 128;
    let done = false;
    for (let k = 1; k < 10; k++) {
      if (i >= e) throw new WireError("truncated varint");
      const c = buf[i++]!;
      result += (c & 0x7f) * mul;
      if (c < 0x80) {
        done = true;
        break;
      }
      mul *= 128;
    }
    if (!done) throw new WireError("varint longer than 10 bytes");
    sink.push(result);
  }
  return i;
}

class IdSink {
  ids: Uint32Array;
  n = 0;
  constructor(capacity: number) {
    this.ids = new Uint32Array(Math.max(8, Math.min(1024, capacity)));
  }
  push(v: number): void {
    if (this.n === this.ids.length) {
      const g = new Uint32Array(this.ids.length * 2);
      g.set(this.ids);
      this.ids = g;
    }
    this.ids[this.n++] = v > 0xffffffff ? OUT_OF_RANGE_ID : v;
  }
}

/** A stream handle read from the wire; one past uint32 makes the frame undecodable. */
function fitHandle(v: number): number {
  if (v > 0xffffffff) throw new WireError("a handle does not fit uint32");
  return v;
}

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
  let bad = false;
  while (r.pos < r.end) {
    const t = r.varint();
    const f = t >>> 3;
    const w = t & 7;
    if (w === 2 && ((f >= 1 && f <= 3) || (f >= 6 && f <= 8))) {
      const v = readStr(r, buf, names);
      if (v === null) bad = true;
      else if (f === 1) stream = v;
      else if (f === 2) role = v;
      else if (f === 3) mode = v;
      else if (f === 6) format = v;
      else if (f === 7) reasoningField = v;
      else model = v;
    } else if (w === 0 && (f === 4 || f === 5 || f === 9)) {
      const v = r.varint();
      if (f === 4) whole = v !== 0;
      else if (f === 5) nonStrict = v !== 0;
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
    if (w === 2 && (f === 1 || f === 2)) {
      const v = readStr(r, buf, names);
      if (v === null) bad = true;
      else if (f === 1) stream = v;
      else reason = v;
    } else if (w === 0 && f === 3) handle = fitHandle(r.varint());
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

  /** Read a binary ClientFrame. `maxIds` bounds the ids of the whole frame. */
  read(buf: Uint8Array, s: Schema, maxIds: number): ReadFrame {
    this.sink.n = 0;
    this.ops.clear();
    const r = readBinary(buf, s, maxIds, this.sink, this.ops, this.frame.reset(buf), this.op.reset(buf), this.r.reset(buf), this.names);
    // a frame far larger than usual does not keep its id array alive
    if (this.sink.ids.length > 65536) this.sink.ids = new Uint32Array(64);
    return r;
  }
}

const EMPTY = new Uint8Array(0);

/** Names remembered per reader before it starts over. */
const MAX_NAMES = 65536;

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
export function readBinaryFrame(buf: Uint8Array, s: Schema, maxIds: number): ReadFrame {
  return readBinary(
    buf,
    s,
    maxIds,
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
  sink: IdSink,
  ops: OpList,
  frame: Reader,
  op: Reader,
  r: Reader,
  names: Map<number, string> | null,
): ReadFrame {
  const errors: OpError[] = [];
  try {
    while (frame.pos < frame.end) {
      const tag = frame.varint();
      if (tag >>> 3 !== 1 || (tag & 7) !== 2) {
        frame.skip(tag & 7); // unknown ClientFrame field: ignored, as protobuf does
        continue;
      }
      const olen = frame.length();
      op.at(frame.pos, frame.pos + olen);
      frame.pos += olen;
      let kind = 0;
      let ps = 0;
      let pe = 0;
      while (op.pos < op.end) {
        const t = op.varint();
        const f = t >>> 3;
        if (f >= 1 && f <= 4 && (t & 7) === 2) {
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
      if (kind === OP_OPEN || kind === OP_CLOSE) {
        const o = kind === OP_OPEN ? readOpen(r.at(ps, pe), buf, names) : readClose(r.at(ps, pe), buf, names);
        if ("kind" in o) ops.other(o);
        else errors.push(o);
      } else if (kind === OP_RENDER) ops.other(decodeRender(buf.subarray(ps, pe), s));
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
          if (f === 1 && w === 2) {
            const v = readStr(r, buf, names);
            if (v === null) bad = true;
            else stream = v;
          } else if (f === 2 && w === 2) {
            const len = r.varint();
            const ie = r.pos + len;
            if (len > r.end - r.pos) throw new WireError("length-delimited field runs past its parent");
            if (sink.n + len > maxIds && sink.n + packedCount(buf, r.pos, ie) > maxIds) {
              return refused("too_many_ids", `the frame carries more than ${maxIds} token ids`);
            }
            r.pos = readPacked(buf, r.pos, ie, sink);
          } else if (f === 2 && w === 0) sink.push(r.varint());
          else if (f === 3 && w === 0) handle = fitHandle(r.varint());
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
  return { ops, ids: sink.ids, errors };
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A field by its proto name or its lowerCamelCase JSON name. */
function field(o: Json, name: string): unknown {
  if (name in o) return o[name];
  const camel = name.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
  return o[camel];
}

function stringField(o: Json, name: string): string | Error {
  const v = field(o, name);
  if (v === undefined || v === null) return "";
  return typeof v === "string" ? v : new Error(`${name} must be a string`);
}

function boolField(o: Json, name: string): boolean | Error {
  const v = field(o, name);
  if (v === undefined || v === null) return false;
  return typeof v === "boolean" ? v : new Error(`${name} must be true or false`);
}

/** A uint32 field: a number, or a decimal string as the protobuf JSON mapping allows. */
function uint32Field(o: Json, name: string): number | Error {
  const v = field(o, name);
  if (v === undefined || v === null) return 0;
  const n = typeof v === "string" && /^[0-9]{1,10}$/.test(v) ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > 0xffffffff) return new Error(`${name} must be an integer in 0..2^32-1`);
  return n;
}

/** Read the JSON form (a text frame) of a ClientFrame. */
export function readJsonFrame(text: string, maxIds: number): ReadFrame {
  const fatal = (message: string): ReadFrame => refused("bad_frame", message);
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    return fatal(`text frame is not JSON: ${(e as Error).message}`);
  }
  if (!isObject(doc)) return fatal("a ClientFrame must be a JSON object");
  const list = doc.ops ?? [];
  if (!Array.isArray(list)) return fatal("ops must be an array");
  const ops = new OpList();
  const errors: OpError[] = [];
  const sink = new IdSink(64);
  for (const [i, op] of list.entries()) {
    if (!isObject(op)) {
      errors.push({ code: "bad_frame", message: `ops[${i}] must be an object`, stream: "" });
      continue;
    }
    const inner = (["open", "tokens", "close", "render"] as const).filter((k) => op[k] !== undefined && op[k] !== null);
    if (inner.length !== 1) {
      errors.push({
        code: inner.length === 0 ? "unknown_op" : "bad_frame",
        message: `ops[${i}] must hold exactly one of open, tokens, close, render`,
        stream: "",
      });
      continue;
    }
    if (inner[0] === "render") {
      const body = op.render;
      const id = isObject(body) ? field(body, "request_id") : undefined;
      const json = isObject(body) ? field(body, "request_json") : undefined;
      if (typeof id !== "string" || typeof json !== "string") {
        errors.push({
          code: "bad_frame",
          message: `ops[${i}].render needs request_id and request_json strings`,
          stream: typeof id === "string" ? id : "",
        });
        continue;
      }
      ops.other({ kind: OP_RENDER, stream: id, handle: 0, json });
      continue;
    }
    const key = inner[0]!;
    const body = op[key];
    if (!isObject(body)) {
      errors.push({ code: "bad_frame", message: `ops[${i}].${key} must be an object`, stream: "" });
      continue;
    }
    const stream = stringField(body as Json, "stream");
    if (stream instanceof Error) {
      errors.push({ code: "bad_frame", message: `ops[${i}].${key}: ${stream.message}`, stream: "" });
      continue;
    }
    const handle = uint32Field(body, "handle");
    if (handle instanceof Error) {
      errors.push({ code: "bad_frame", message: `ops[${i}].${key}: ${handle.message}`, stream });
      continue;
    }
    const bad = (code: OpError["code"], message: string) =>
      errors.push({ code, message: `ops[${i}].${key}: ${message}`, stream, ...(handle !== 0 && key !== "open" ? { handle } : {}) });
    if (key === "open") {
      const role = stringField(body, "role");
      const mode = stringField(body, "mode");
      const whole = boolField(body, "whole_messages");
      const nonStrict = boolField(body, "non_strict");
      const format = stringField(body, "format");
      const reasoningField = stringField(body, "reasoning_field");
      const model = stringField(body, "model");
      const err = [role, mode, whole, nonStrict, format, reasoningField, model].find((v) => v instanceof Error) as Error | undefined;
      if (err) {
        bad("bad_frame", err.message);
        continue;
      }
      ops.other({
        kind: OP_OPEN,
        stream,
        handle,
        role: role as string,
        mode: mode as string,
        whole_messages: whole as boolean,
        non_strict: nonStrict as boolean,
        format: format as string,
        reasoning_field: reasoningField as string,
        model: model as string,
      });
    } else if (key === "close") {
      const reason = stringField(body, "reason");
      if (reason instanceof Error) {
        bad("bad_frame", reason.message);
        continue;
      }
      ops.other({ kind: OP_CLOSE, stream, handle, reason });
    } else {
      const ids = field(body, "ids") ?? [];
      if (!Array.isArray(ids)) {
        bad("bad_token_id", "ids must be an array of token ids");
        continue;
      }
      const wrong = ids.findIndex((v) => typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 0xffffffff);
      if (wrong >= 0) {
        bad("bad_token_id", `ids[${wrong}] is not a uint32 token id: ${JSON.stringify(ids[wrong])}`);
        continue;
      }
      if (sink.n + ids.length > maxIds) return refused("too_many_ids", `the frame carries more than ${maxIds} token ids`);
      const start = sink.n;
      for (const v of ids as number[]) sink.push(v);
      ops.tokens(stream, handle, start, sink.n);
    }
  }
  return { ops, ids: sink.ids.subarray(0, sink.n), errors };
}
