/**
 * The hot path of event encoding: `delta` events written straight into
 * protobuf bytes (and JSON text) without building intermediate objects.
 * The bytes decode to the same event as protobufjs's encoding of the wire
 * event (a test checks that); other event types go through protobufjs.
 */
import type { DeltaEvent } from "../core/events.js";

const KINDS = ["reasoning", "content", "commentary", "tool_args", "other"];
const KIND_BYTES = new Map(KINDS.map((k) => [k, Buffer.from(k, "utf8")]));

function varintSize(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v >>>= 7;
    n++;
  }
  return n;
}

function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/** Appends ServerFrame fragments (field 1 = one Event) to a growable buffer. */
export class FrameWriter {
  private buf = Buffer.allocUnsafe(4096);
  private len = 0;

  private ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + n));
    this.buf.copy(grown, 0, 0, this.len);
    this.buf = grown;
  }

  private varint(v: number): void {
    while (v >= 0x80) {
      this.buf[this.len++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    this.buf[this.len++] = v;
  }

  /** Event { stream = 1; delta = 4 { index = 1; kind = 2; text = 3 } } */
  delta(stream: string, ev: DeltaEvent): void {
    const kind = KIND_BYTES.get(ev.kind)!;
    const textLen = utf8Length(ev.text);
    const nameLen = utf8Length(stream);
    const deltaLen =
      (ev.index !== 0 ? 1 + varintSize(ev.index) : 0) + 1 + varintSize(kind.length) + kind.length + (textLen > 0 ? 1 + varintSize(textLen) + textLen : 0);
    const eventLen =
      (nameLen > 0 ? 1 + varintSize(nameLen) + nameLen : 0) + 1 + varintSize(deltaLen) + deltaLen;
    this.ensure(1 + varintSize(eventLen) + eventLen);
    this.buf[this.len++] = 0x0a; // ServerFrame.events
    this.varint(eventLen);
    if (nameLen > 0) {
      this.buf[this.len++] = 0x0a; // Event.stream
      this.varint(nameLen);
      this.len += this.buf.write(stream, this.len, "utf8");
    }
    this.buf[this.len++] = 0x22; // Event.delta
    this.varint(deltaLen);
    if (ev.index !== 0) {
      this.buf[this.len++] = 0x08; // Delta.index
      this.varint(ev.index);
    }
    this.buf[this.len++] = 0x12; // Delta.kind
    this.varint(kind.length);
    kind.copy(this.buf, this.len);
    this.len += kind.length;
    if (textLen > 0) {
      this.buf[this.len++] = 0x1a; // Delta.text
      this.varint(textLen);
      this.len += this.buf.write(ev.text, this.len, "utf8");
    }
  }

  /** Any other event, already encoded as an Event message by protobufjs. */
  event(eventBytes: Uint8Array): void {
    this.ensure(1 + varintSize(eventBytes.length) + eventBytes.length);
    this.buf[this.len++] = 0x0a;
    this.varint(eventBytes.length);
    this.buf.set(eventBytes, this.len);
    this.len += eventBytes.length;
  }

  /** The bytes written so far, copied out (exact size), and a reset. */
  take(): Uint8Array {
    const out = new Uint8Array(this.len);
    out.set(this.buf.subarray(0, this.len));
    this.len = 0;
    return out;
  }
}

/** The JSON text of a delta wire event. */
export function deltaJson(stream: string, ev: DeltaEvent): string {
  return `{"stream":${JSON.stringify(stream)},"delta":{"index":${ev.index},"kind":"${ev.kind}","text":${JSON.stringify(ev.text)}}}`;
}
