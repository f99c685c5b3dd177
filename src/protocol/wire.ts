/**
 * Protobuf wire helpers shared by the hand-written reader (binary-frame.ts)
 * and writer (frame-writer.ts): varints both ways, a minimal reader over one
 * buffer, UTF-8 string fields, and packed repeated uint32 ids.
 */
import { CodedError } from "../core/errors.js";
import { Wire } from "./fields.js";
import { OUT_OF_RANGE_ID } from "./ops.js";

/** A frame that does not follow the wire format: the frame is refused (`bad_frame`), with this message. */
export class WireError extends CodedError {
  constructor(message: string) {
    super("bad_frame", message);
  }
}

// ignoreBOM: a leading U+FEFF is part of the string, as protobuf and JSON keep it
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * A UTF-8 string field; null when it is not valid UTF-8. Stream names are
 * short and almost always ASCII: those are built directly (a TextDecoder
 * call costs more than the name).
 */
export function decodeString(buf: Uint8Array, s: number, e: number): string | null {
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
export class Reader {
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
    // the usual one-byte varint (a tag, a length, a small handle) first, then
    // two bytes (a handle or length up to 16383), inline; the rest in a call
    const pos = this.pos;
    const buf = this.buf;
    if (pos + 1 < this.end) {
      const b = buf[pos]!;
      if (b < 0x80) {
        this.pos = pos + 1;
        return b;
      }
      const c = buf[pos + 1]!;
      if (c < 0x80) {
        this.pos = pos + 2;
        return (b & 0x7f) | (c << 7);
      }
    }
    // (a field's last byte, as well as longer varints, goes the long way)
    return this.longVarint();
  }

  private longVarint(): number {
    // values up to 2^53 are exact; larger ones only matter as "too large"
    const buf = this.buf;
    const end = this.end;
    let pos = this.pos;
    let result = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      if (pos >= end) {
        this.pos = pos;
        throw new WireError("truncated varint");
      }
      const b = buf[pos++]!;
      result += (b & 0x7f) * mul;
      if (b < 0x80) {
        this.pos = pos;
        return result;
      }
      mul *= 128;
    }
    this.pos = pos;
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
    if (len > this.end - this.pos) pastParent();
    return len;
  }

  /** Returns [start, end) of a length-delimited field's payload. */
  bytes(): [number, number] {
    const len = this.varint();
    const start = this.pos;
    if (len > this.end - start) pastParent();
    this.pos = start + len;
    return [start, start + len];
  }

  skip(wireType: number): void {
    switch (wireType) {
      case Wire.VARINT:
        this.varint();
        return;
      case Wire.I64:
        this.pos += 8;
        break;
      case Wire.LEN:
        this.bytes();
        return;
      case Wire.I32:
        this.pos += 4;
        break;
      default:
        throw new WireError(`unsupported wire type ${wireType}`);
    }
    if (this.pos > this.end) throw new WireError("truncated fixed-width field");
  }
}

/** Thrown out of line: the readers' inlined fast paths stay small. */
function pastParent(): never {
  throw new WireError("length-delimited field runs past its parent");
}

/** The ids of a frame, in one growing array; ids past uint32 are kept as OUT_OF_RANGE_ID. */
export class IdSink {
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

/** Varints in a packed field (each ends with a byte below 0x80). */
export function packedCount(buf: Uint8Array, s: number, e: number): number {
  let n = 0;
  for (let i = s; i < e; i++) if (buf[i]! < 0x80) n++;
  return n;
}

/** Read a packed repeated uint32 field's varints into the sink; returns the end. */
export function readPacked(buf: Uint8Array, s: number, e: number, sink: IdSink): number {
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

/** The bytes of `v` (a uint32) as a protobuf varint. */
export function varintSize(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v >>>= 7;
    n++;
  }
  return n;
}

/** Writes `v` as a protobuf varint at `at`; returns the position after it. */
export function putVarint(buf: Uint8Array, at: number, v: number): number {
  while (v >= 0x80) {
    buf[at++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buf[at++] = v;
  return at;
}
