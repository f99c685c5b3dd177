/**
 * The protobuf field numbers of the messages read and written by hand
 * (binary-frame.ts reads ClientFrames, frame-writer.ts writes ServerFrames),
 * in one table: nowhere else in src/ spells a field number or a tag byte.
 * test/protocol/fields.test.ts checks the table against
 * proto/harmony/v1/harmony.proto both ways (every entry is the .proto's
 * field, every field of a message listed here has its entry).
 *
 * Keys are the .proto's message and field names; `type` is the field's type
 * as the .proto spells it, `repeated` marks repeated fields.
 */

/** Protobuf wire types (the low 3 bits of a tag). */
export const Wire = { VARINT: 0, I64: 1, LEN: 2, I32: 5 } as const;

export interface FieldSpec {
  readonly no: number;
  readonly type: string;
  readonly repeated?: true;
}

export const FIELDS = {
  ClientFrame: {
    ops: { no: 1, type: "Op", repeated: true },
  },
  /** The oneof `op`: an op's kind is its field number here (see ops.ts). */
  Op: {
    open: { no: 1, type: "Open" },
    tokens: { no: 2, type: "Tokens" },
    close: { no: 3, type: "Close" },
    render: { no: 4, type: "RenderRequest" },
  },
  Open: {
    stream: { no: 1, type: "string" },
    role: { no: 2, type: "string" },
    mode: { no: 3, type: "string" },
    whole_messages: { no: 4, type: "bool" },
    non_strict: { no: 5, type: "bool" },
    format: { no: 6, type: "string" },
    reasoning_field: { no: 7, type: "string" },
    model: { no: 8, type: "string" },
    handle: { no: 9, type: "uint32" },
    after_stop: { no: 10, type: "string" },
    tools: { no: 11, type: "string", repeated: true },
    calls: { no: 12, type: "string" },
  },
  Tokens: {
    stream: { no: 1, type: "string" },
    ids: { no: 2, type: "uint32", repeated: true },
    handle: { no: 3, type: "uint32" },
  },
  Close: {
    stream: { no: 1, type: "string" },
    reason: { no: 2, type: "string" },
    handle: { no: 3, type: "uint32" },
  },
  ServerFrame: {
    events: { no: 1, type: "Event", repeated: true },
  },
  Event: {
    stream: { no: 1, type: "string" },
    message_start: { no: 2, type: "MessageStart" },
    tool_call_start: { no: 3, type: "ToolCallStart" },
    delta: { no: 4, type: "Delta" },
    message_end: { no: 5, type: "MessageEnd" },
    recovery: { no: 6, type: "Recovery" },
    error: { no: 7, type: "Error" },
    done: { no: 8, type: "Done" },
    rendered: { no: 9, type: "Rendered" },
    openai: { no: 10, type: "google.protobuf.Struct" },
    handle: { no: 11, type: "uint32" },
    tool_call_end: { no: 12, type: "ToolCallEnd" },
  },
  MessageStart: {
    index: { no: 1, type: "uint32" },
    role: { no: 2, type: "string" },
    name: { no: 3, type: "string" },
    channel: { no: 4, type: "string" },
    recipient: { no: 5, type: "string" },
    content_type: { no: 6, type: "string" },
  },
  ToolCallStart: {
    index: { no: 1, type: "uint32" },
    call_index: { no: 2, type: "uint32" },
    id: { no: 3, type: "string" },
    recipient: { no: 4, type: "string" },
    namespace: { no: 5, type: "string" },
    name: { no: 6, type: "string" },
    channel: { no: 7, type: "string" },
    content_type: { no: 8, type: "string" },
  },
  Delta: {
    index: { no: 1, type: "uint32" },
    kind: { no: 2, type: "string" },
    text: { no: 3, type: "string" },
  },
  ToolCallEnd: {
    index: { no: 1, type: "uint32" },
    call_index: { no: 2, type: "uint32" },
    id: { no: 3, type: "string" },
    name: { no: 4, type: "string" },
    arguments: { no: 5, type: "string" },
    valid_json: { no: 6, type: "bool" },
  },
  Recovery: {
    at: { no: 1, type: "uint32" },
    kind: { no: 2, type: "string" },
    detail: { no: 3, type: "string" },
    raw: { no: 4, type: "string" },
    count: { no: 5, type: "uint32" },
  },
  MessageEnd: {
    index: { no: 1, type: "uint32" },
    stop: { no: 2, type: "string" },
    message: { no: 3, type: "Message" },
  },
  Done: {
    finish_reason: { no: 1, type: "string" },
    tokens: { no: 2, type: "uint32" },
    messages: { no: 3, type: "uint32" },
    recoveries: { no: 4, type: "uint32" },
    reasoning_tokens: { no: 5, type: "uint32" },
  },
} as const satisfies Record<string, Record<string, FieldSpec>>;

/** Wire types of the scalar types the table uses; any other type is a message. */
const SCALAR_WIRE: Readonly<Record<string, number>> = { uint32: Wire.VARINT, bool: Wire.VARINT, string: Wire.LEN };

/** The wire type a field is written with (repeated scalars packed, as proto3 does). */
export function wireType(f: FieldSpec): number {
  const scalar = SCALAR_WIRE[f.type];
  if (scalar === undefined) {
    if (!/^[A-Z]|\./.test(f.type)) throw new Error(`bug: no wire type for the field type ${f.type}`);
    return Wire.LEN; // a message
  }
  return f.repeated ? Wire.LEN : scalar;
}

/** A tag: the varint before a field's value, `field number << 3 | wire type`. */
export function tag(no: number, wire: number): number {
  return no * 8 + wire;
}

/**
 * A field's tag as the single byte the writer puts down (field numbers up to
 * 15); throws, at load, for a field whose tag takes more.
 */
export function tagByte(f: FieldSpec, wire: number = wireType(f)): number {
  const t = tag(f.no, wire);
  if (t > 0x7f) throw new Error(`bug: field ${f.no}'s tag does not fit one byte`);
  return t;
}
