/**
 * The hot path of event encoding: `delta` events, and the events every
 * message and stream has (message_start, tool_call_start, message_end,
 * done), written straight into protobuf bytes (and deltas into JSON text)
 * without building intermediate objects. The bytes decode to the same event
 * as protobufjs's encoding of the wire event (tests check that); other event
 * types go through protobufjs.
 */
import type { DeltaEvent, HarmonyEvent } from "../core/events.js";
import type { StreamRef } from "./events.js";
import { FIELDS, tagByte } from "./fields.js";
import { putVarint, varintSize } from "./wire.js";

// the tags written below, one byte each (tagByte checks): the size sums count 1 per tag
const { ServerFrame, Event, Delta, MessageStart, ToolCallStart, ToolCallEnd, Recovery, MessageEnd, Done } = FIELDS;
const FRAME_EVENT = tagByte(ServerFrame.events);
const EVENT_STREAM = tagByte(Event.stream);
const EVENT_HANDLE = tagByte(Event.handle);
const EVENT_MESSAGE_START = tagByte(Event.message_start);
const EVENT_TOOL_CALL_START = tagByte(Event.tool_call_start);
const EVENT_DELTA = tagByte(Event.delta);
const EVENT_MESSAGE_END = tagByte(Event.message_end);
const EVENT_DONE = tagByte(Event.done);
const EVENT_TOOL_CALL_END = tagByte(Event.tool_call_end);
const EVENT_RECOVERY = tagByte(Event.recovery);
const DELTA_INDEX = tagByte(Delta.index);
const DELTA_KIND = tagByte(Delta.kind);
const DELTA_TEXT = tagByte(Delta.text);
const MS_INDEX = tagByte(MessageStart.index);
const MS_ROLE = tagByte(MessageStart.role);
const MS_NAME = tagByte(MessageStart.name);
const MS_CHANNEL = tagByte(MessageStart.channel);
const MS_RECIPIENT = tagByte(MessageStart.recipient);
const MS_CONTENT_TYPE = tagByte(MessageStart.content_type);
const TCS_INDEX = tagByte(ToolCallStart.index);
const TCS_CALL_INDEX = tagByte(ToolCallStart.call_index);
const TCS_ID = tagByte(ToolCallStart.id);
const TCS_RECIPIENT = tagByte(ToolCallStart.recipient);
const TCS_NAMESPACE = tagByte(ToolCallStart.namespace);
const TCS_NAME = tagByte(ToolCallStart.name);
const TCS_CHANNEL = tagByte(ToolCallStart.channel);
const TCS_CONTENT_TYPE = tagByte(ToolCallStart.content_type);
const TCE_INDEX = tagByte(ToolCallEnd.index);
const TCE_CALL_INDEX = tagByte(ToolCallEnd.call_index);
const TCE_ID = tagByte(ToolCallEnd.id);
const TCE_NAME = tagByte(ToolCallEnd.name);
const TCE_ARGUMENTS = tagByte(ToolCallEnd.arguments);
const TCE_VALID_JSON = tagByte(ToolCallEnd.valid_json);
const REC_AT = tagByte(Recovery.at);
const REC_KIND = tagByte(Recovery.kind);
const REC_DETAIL = tagByte(Recovery.detail);
const REC_RAW = tagByte(Recovery.raw);
const REC_COUNT = tagByte(Recovery.count);
const ME_INDEX = tagByte(MessageEnd.index);
const ME_STOP = tagByte(MessageEnd.stop);
const DONE_FINISH_REASON = tagByte(Done.finish_reason);
const DONE_TOKENS = tagByte(Done.tokens);
const DONE_MESSAGES = tagByte(Done.messages);
const DONE_RECOVERIES = tagByte(Done.recoveries);
const DONE_REASONING_TOKENS = tagByte(Done.reasoning_tokens);
/** Event.handle's tag as a one-char string (handleField's start). */
const HANDLE_TAG = String.fromCharCode(EVENT_HANDLE);

const KINDS = ["reasoning", "content", "commentary", "tool_args", "other"];
/** Delta.kind with its tag and length, per kind. */
const KIND_FIELDS = new Map(KINDS.map((k) => [k, Uint8Array.from([DELTA_KIND, k.length, ...Buffer.from(k, "utf8")])]));
const [REASONING, CONTENT, COMMENTARY, TOOL_ARGS, OTHER] = KINDS.map((k) => KIND_FIELDS.get(k)!) as [
  Uint8Array,
  Uint8Array,
  Uint8Array,
  Uint8Array,
  Uint8Array,
];

/** A kind's field: a few string compares on the five kinds cost less than hashing for a Map. */
function kindField(kind: string): Uint8Array {
  return kind === "reasoning"
    ? REASONING
    : kind === "content"
      ? CONTENT
      : kind === "tool_args"
        ? TOOL_ARGS
        : kind === "commentary"
          ? COMMENTARY
          : kind === "other"
            ? OTHER
            : KIND_FIELDS.get(kind)!;
}

/** Size of the slabs a slabbed FrameWriter writes batches into. */
const SLAB = 64 * 1024;

/** Below this many UTF-16 units, ASCII text is copied by a JS loop (cheaper than a native call). */
const SHORT = 48;

/*
 * The strings the writer takes come in many of V8's representations (flat,
 * cons, sliced, internalized; one- or two-byte): a loop reading
 * `s.length` and `s.charCodeAt` per character turns megamorphic (a stub
 * cache lookup per character, several times the cost of a monomorphic
 * read). So lengths are native,
 * and characters are read through String.prototype.charCodeAt itself,
 * which TurboFan inlines whatever the string's map.
 */
const charCodeAt = String.prototype.charCodeAt;

/** UTF-8 length of `s` (a lone surrogate counts 3, as the U+FFFD it is written as). */
function textBytes(s: string): number {
  // a short ASCII string (a role, a channel, a call id) is counted here: a
  // call into Buffer.byteLength's C++ cost more than the loop
  const n = s.length;
  if (n < SHORT) {
    let i = 0;
    while (i < n && charCodeAt.call(s, i) < 0x80) i++;
    if (i === n) return n;
  }
  return Buffer.byteLength(s); // no encoding argument: the wrapper goes straight to its UTF-8 count
}

/**
 * Event.stream with its tag and length, as a string of byte
 * values (one char per byte): computed once per stream, copied into every
 * event of it. A short string costs far less memory per stream than a
 * typed array. Empty for an empty name (proto3 default).
 */
export function streamField(stream: string): string {
  const bytes = Buffer.from(stream, "utf8");
  if (bytes.length === 0) return "";
  const head = Buffer.allocUnsafe(6); // tag + up to 5 varint bytes (a uint32 length)
  head[0] = EVENT_STREAM;
  const headLen = putVarint(head, 1, bytes.length);
  return head.toString("latin1", 0, headLen) + bytes.toString("latin1");
}

/**
 * Event.handle (a varint) with its tag, as a string of byte
 * values, for streams opened with a handle (their events carry it instead
 * of the name); the same use as `streamField`.
 */
export function handleField(handle: number): string {
  // the tag, then the varint: a few chars, with no buffer
  let field = HANDLE_TAG;
  let v = handle;
  while (v >= 0x80) {
    field += String.fromCharCode((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  return field + String.fromCharCode(v);
}

/** How a stream's JSON events name it: `"stream":"…"`, or `"handle":N` for streams with a handle. */
export function jsonRef(ref: StreamRef): string {
  return "handle" in ref ? `"handle":${ref.handle}` : `"stream":${JSON.stringify(ref.stream)}`;
}

/** Appends ServerFrame fragments (ServerFrame.events: one Event each) to a growable buffer. */
export class FrameWriter {
  private buf: Buffer;
  private len = 0;
  /** The UTF-8 lengths of the event's strings common() sized, for str() to write in the same order (at most 6). */
  private readonly sizes = new Int32Array(8);
  private nSized = 0;
  private nWritten = 0;
  /** Where the current batch starts in `buf` (always 0 unless slabbed). */
  private base = 0;

  /**
   * @param slabbed take() hands out views of the buffer it wrote into,
   * instead of exact-size copies, and the next batch is written after them
   * (a new slab when one is full): no allocation and copy per batch, a
   * measured cost on every answer. For results used on this thread only (a
   * view handed to postMessage would clone its whole slab).
   * A slab stays alive while any of its views does: at most SLAB bytes per
   * answer still queued on a socket.
   */
  constructor(private readonly slabbed = false) {
    this.buf = Buffer.allocUnsafeSlow(slabbed ? SLAB : 4096);
  }

  private ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    // the batch so far moves to the start of a new buffer (a slab: earlier views keep the old one)
    const used = this.len - this.base;
    const grown = Buffer.allocUnsafeSlow(Math.max(this.slabbed ? SLAB : this.buf.length * 2, 2 * (used + n)));
    this.buf.copy(grown, 0, this.base, this.len);
    this.buf = grown;
    this.base = 0;
    this.len = used;
  }

  private varint(v: number): void {
    this.len = putVarint(this.buf, this.len, v);
  }

  /** Event { stream; delta { index; kind; text } } (the name field, or a handle field, written first: any field order decodes) */
  delta(stream: string, ev: DeltaEvent): void {
    this.deltaOf(streamField(stream), ev);
  }

  /** The same, with the stream's field from `streamField` (the hot path). */
  deltaOf(nameField: string, ev: DeltaEvent): void {
    const kind = kindField(ev.kind);
    const text = ev.text;
    const units = text.length;
    const textLen = textBytes(text); // === units exactly when the text is ASCII
    const deltaLen = (ev.index !== 0 ? 1 + varintSize(ev.index) : 0) + kind.length + (textLen > 0 ? 1 + varintSize(textLen) + textLen : 0);
    const eventLen = nameField.length + 1 + varintSize(deltaLen) + deltaLen;
    this.ensure(1 + varintSize(eventLen) + eventLen);
    const buf = this.buf;
    buf[this.len++] = FRAME_EVENT; // ServerFrame.events
    this.varint(eventLen);
    let at = this.len;
    for (let i = 0, n = nameField.length; i < n; i++) buf[at++] = charCodeAt.call(nameField, i);
    buf[at++] = EVENT_DELTA; // Event.delta
    this.len = at;
    this.varint(deltaLen);
    if (ev.index !== 0) {
      buf[this.len++] = DELTA_INDEX; // Delta.index
      this.varint(ev.index);
    }
    at = this.len;
    for (let i = 0; i < kind.length; i++) buf[at++] = kind[i]!;
    this.len = at;
    if (textLen > 0) {
      buf[this.len++] = DELTA_TEXT; // Delta.text
      this.varint(textLen);
      if (textLen === units && units < SHORT) {
        at = this.len;
        for (let i = 0; i < units; i++) buf[at++] = charCodeAt.call(text, i);
        this.len = at;
      } else this.len += buf.write(text, this.len, "utf8");
    }
  }

  /**
   * The same delta, its text given as tokens `ids[start, end)` whose bytes
   * (`bytes[offsets[id], offsets[id + 1])`, whole UTF-8) are copied as they
   * are: no string is built. It repeats deltaOf's header code on purpose: a
   * helper shared by both made this, the hottest writer, measurably slower.
   */
  deltaTokens(
    nameField: string,
    index: number,
    kind: string,
    bytes: Uint8Array,
    offsets: Uint32Array,
    ids: ArrayLike<number>,
    start: number,
    end: number,
  ): void {
    const kindBytes = kindField(kind);
    let textLen = 0;
    for (let i = start; i < end; i++) {
      const id = ids[i]!;
      textLen += offsets[id + 1]! - offsets[id]!;
    }
    const deltaLen = (index !== 0 ? 1 + varintSize(index) : 0) + kindBytes.length + (textLen > 0 ? 1 + varintSize(textLen) + textLen : 0);
    const eventLen = nameField.length + 1 + varintSize(deltaLen) + deltaLen;
    this.ensure(1 + varintSize(eventLen) + eventLen);
    // one position in a local throughout, and the usual one-byte varints written in place
    const buf = this.buf;
    let at = this.len;
    buf[at++] = FRAME_EVENT; // ServerFrame.events
    if (eventLen < 0x80) buf[at++] = eventLen;
    else at = putVarint(buf, at, eventLen);
    for (let i = 0, n = nameField.length; i < n; i++) buf[at++] = charCodeAt.call(nameField, i);
    buf[at++] = EVENT_DELTA; // Event.delta
    if (deltaLen < 0x80) buf[at++] = deltaLen;
    else at = putVarint(buf, at, deltaLen);
    if (index !== 0) {
      buf[at++] = DELTA_INDEX; // Delta.index
      if (index < 0x80) buf[at++] = index;
      else at = putVarint(buf, at, index);
    }
    // a few bytes: a loop (buf.set is a property lookup and a builtin call per delta, a visible share of the service's thread)
    for (let k = 0, n = kindBytes.length; k < n; k++) buf[at++] = kindBytes[k]!;
    if (textLen > 0) {
      buf[at++] = DELTA_TEXT; // Delta.text
      if (textLen < 0x80) buf[at++] = textLen;
      else at = putVarint(buf, at, textLen);
      for (let i = start; i < end; i++) {
        const id = ids[i]!;
        const e = offsets[id + 1]!;
        for (let b = offsets[id]!; b < e; b++) buf[at++] = bytes[b]!;
      }
    }
    this.len = at;
  }

  /**
   * message_start, tool_call_start, message_end (without a whole message)
   * and done, written with the stream's field from `streamField` or
   * `handleField`, as protobufjs would write them (same fields, same
   * order: the name before the event, a handle after it). Returns false,
   * writing nothing, for any other event.
   */
  common(refField: string, ev: HarmonyEvent): boolean {
    const type = ev.type; // read once: a megamorphic lookup (events come in many shapes)
    // each string's UTF-8 length is taken once, for the size, and used again by str()
    this.nSized = 0;
    this.nWritten = 0;
    let tag: number;
    let size: number;
    switch (type) {
      case "message_start":
        tag = EVENT_MESSAGE_START;
        size =
          1 +
          varintSize(ev.index) +
          this.sized(ev.role) +
          this.sized(ev.name) +
          this.sized(ev.channel) +
          this.sized(ev.recipient) +
          this.sized(ev.content_type);
        break;
      case "tool_call_start":
        tag = EVENT_TOOL_CALL_START;
        size =
          2 +
          varintSize(ev.index) +
          varintSize(ev.call_index) +
          this.sized(ev.id) +
          this.sized(ev.recipient) +
          this.sized(ev.namespace) +
          this.sized(ev.name) +
          this.sized(ev.channel) +
          this.sized(ev.content_type);
        break;
      case "message_end":
        if (ev.message !== undefined) return false;
        tag = EVENT_MESSAGE_END;
        size = 1 + varintSize(ev.index) + this.sized(ev.stop);
        break;
      case "tool_call_end":
        tag = EVENT_TOOL_CALL_END;
        size = 4 + varintSize(ev.index) + varintSize(ev.call_index) + this.sized(ev.id) + this.sized(ev.name) + this.sized(ev.arguments);
        break;
      case "recovery":
        tag = EVENT_RECOVERY;
        size =
          1 +
          varintSize(ev.at) +
          this.sized(ev.kind) +
          this.sized(ev.detail) +
          (ev.raw === undefined ? 0 : this.sized(ev.raw)) +
          (ev.count === undefined ? 0 : 1 + varintSize(ev.count));
        break;
      case "done":
        tag = EVENT_DONE;
        size =
          this.sized(ev.finish_reason) +
          4 +
          varintSize(ev.tokens) +
          varintSize(ev.messages) +
          varintSize(ev.recoveries) +
          varintSize(ev.reasoning_tokens);
        break;
      default:
        return false;
    }
    const eventLen = refField.length + 1 + varintSize(size) + size;
    this.ensure(1 + varintSize(eventLen) + eventLen);
    this.buf[this.len++] = FRAME_EVENT; // ServerFrame.events
    this.varint(eventLen);
    // fields go in number order, as protobufjs writes them: Event.handle (11) follows
    // the oneof's events up to 10 and precedes tool_call_end (12); the name (1) leads
    const handleAfter = refField.charCodeAt(0) === EVENT_HANDLE && tag !== EVENT_TOOL_CALL_END;
    if (!handleAfter) this.latin1(refField);
    this.buf[this.len++] = tag;
    this.varint(size);
    switch (type) {
      case "message_start":
        this.uint(MS_INDEX, ev.index);
        this.str(MS_ROLE, ev.role);
        this.str(MS_NAME, ev.name);
        this.str(MS_CHANNEL, ev.channel);
        this.str(MS_RECIPIENT, ev.recipient);
        this.str(MS_CONTENT_TYPE, ev.content_type);
        break;
      case "tool_call_start":
        this.uint(TCS_INDEX, ev.index);
        this.uint(TCS_CALL_INDEX, ev.call_index);
        this.str(TCS_ID, ev.id);
        this.str(TCS_RECIPIENT, ev.recipient);
        this.str(TCS_NAMESPACE, ev.namespace);
        this.str(TCS_NAME, ev.name);
        this.str(TCS_CHANNEL, ev.channel);
        this.str(TCS_CONTENT_TYPE, ev.content_type);
        break;
      case "message_end":
        this.uint(ME_INDEX, ev.index);
        this.str(ME_STOP, ev.stop);
        break;
      case "tool_call_end":
        this.uint(TCE_INDEX, ev.index);
        this.uint(TCE_CALL_INDEX, ev.call_index);
        this.str(TCE_ID, ev.id);
        this.str(TCE_NAME, ev.name);
        this.str(TCE_ARGUMENTS, ev.arguments);
        this.buf[this.len++] = TCE_VALID_JSON;
        this.buf[this.len++] = ev.valid_json ? 1 : 0;
        break;
      case "recovery":
        this.uint(REC_AT, ev.at);
        this.str(REC_KIND, ev.kind);
        this.str(REC_DETAIL, ev.detail);
        if (ev.raw !== undefined) this.str(REC_RAW, ev.raw);
        if (ev.count !== undefined) this.uint(REC_COUNT, ev.count);
        break;
      case "done":
        this.str(DONE_FINISH_REASON, ev.finish_reason);
        this.uint(DONE_TOKENS, ev.tokens);
        this.uint(DONE_MESSAGES, ev.messages);
        this.uint(DONE_RECOVERIES, ev.recoveries);
        this.uint(DONE_REASONING_TOKENS, ev.reasoning_tokens);
        break;
    }
    if (handleAfter) this.latin1(refField);
    return true;
  }

  /** A string of byte values (a stream field), copied. */
  private latin1(field: string): void {
    const buf = this.buf;
    let at = this.len;
    for (let i = 0, n = field.length; i < n; i++) buf[at++] = charCodeAt.call(field, i);
    this.len = at;
  }

  /** A varint field (written even when 0, as protobufjs writes a set field). */
  private uint(tag: number, v: number): void {
    this.buf[this.len++] = tag;
    this.varint(v);
  }

  /** What a string field takes: tag, length and bytes; 0 when absent (null). Its length is kept for str(). */
  private sized(s: string | null): number {
    if (s === null) return 0;
    const n = textBytes(s);
    this.sizes[this.nSized++] = n;
    return 1 + varintSize(n) + n;
  }

  /** A string field sized() measured, in the same order; nothing when null (an absent optional field). */
  private str(tag: number, s: string | null): void {
    if (s === null) return;
    const n = this.sizes[this.nWritten++]!;
    const buf = this.buf;
    buf[this.len++] = tag;
    this.varint(n);
    if (n === s.length && n < SHORT) {
      let at = this.len;
      for (let i = 0; i < n; i++) buf[at++] = charCodeAt.call(s, i);
      this.len = at;
    } else this.len += buf.write(s, this.len, "utf8");
  }

  /** Any other event, already encoded as an Event message by protobufjs. */
  event(eventBytes: Uint8Array): void {
    this.ensure(1 + varintSize(eventBytes.length) + eventBytes.length);
    this.buf[this.len++] = FRAME_EVENT; // ServerFrame.events
    this.varint(eventBytes.length);
    this.buf.set(eventBytes, this.len);
    this.len += eventBytes.length;
  }

  /** Drop what was written since the last take (a batch that did not finish). */
  clear(): void {
    this.len = this.base;
  }

  /** The bytes written since the last take, and a reset: a copy of exact size, or (slabbed) a view. */
  take(): Uint8Array {
    let out: Uint8Array;
    if (this.slabbed) {
      out = this.buf.subarray(this.base, this.len);
      // the next batch starts after this one, 8-aligned
      this.base = this.len = Math.min(this.buf.length, (this.len + 7) & ~7);
    } else {
      out = new Uint8Array(this.len);
      out.set(this.buf.subarray(0, this.len));
      this.len = 0;
    }
    // one huge batch does not leave a huge buffer behind
    if (this.buf.length > 1 << 20) {
      this.buf = Buffer.allocUnsafeSlow(this.slabbed ? SLAB : 4096);
      this.base = this.len = 0;
    }
    return out;
  }
}

/** The JSON text of a delta wire event; `ref` is the stream's `jsonRef`. */
export function deltaJson(ref: string, ev: DeltaEvent): string {
  return `{${ref},"delta":{"index":${ev.index},"kind":"${ev.kind}","text":${JSON.stringify(ev.text)}}}`;
}
