/** The binary ClientFrame reader, reused across frames as a connection uses it. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BinaryFrameReader, MAX_NAMES, readBinaryFrame } from "../../src/protocol/binary-frame.js";
import type { ReadFrame } from "../../src/protocol/ops.js";
import { schema } from "../../src/protocol/schema.js";
import { fcParams } from "../helpers.js";

const s = schema();

/** What a frame says, independent of how its ids are stored. */
function meaning(r: ReadFrame) {
  return {
    fatal: r.fatal ?? null,
    errors: r.errors,
    ops: r.ops
      .toArray()
      .map((op) =>
        op.kind === 2 ? { kind: op.kind, stream: op.stream, handle: op.handle, ids: Array.from(r.ids.subarray(op.start, op.end)) } : op,
      ),
  };
}

const name = fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom("lane-1", "请求-1", "x".repeat(40)));
const handle = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 300 }), fc.integer({ min: 1, max: 0xffffffff }));
const op = fc.oneof(
  fc.record({ tokens: fc.record({ stream: name, handle, ids: fc.array(fc.nat({ max: 300_000 }), { maxLength: 3000 }) }) }),
  fc.record({
    open: fc.record(
      {
        stream: name,
        handle,
        role: fc.constantFrom("", "assistant", "none"),
        mode: fc.constantFrom("", "strict", "resilient"),
        whole_messages: fc.boolean(),
        non_strict: fc.boolean(),
        format: fc.constantFrom("", "events", "openai.chat"),
        reasoning_field: fc.oneof(fc.constant(""), name),
        model: fc.oneof(fc.constant(""), name),
      },
      { requiredKeys: ["stream"] },
    ),
  }),
  fc.record({ close: fc.record({ stream: name, handle, reason: fc.constantFrom("", "eos", "abort", "длина") }) }),
);
const frame = fc.oneof(
  { weight: 5, arbitrary: fc.array(op, { maxLength: 12 }).map((ops) => s.ClientFrame.encode({ ops }).finish()) },
  // garbage and truncated frames
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 40 }) },
  { weight: 1, arbitrary: fc.array(op, { minLength: 1, maxLength: 3 }).map((ops) => s.ClientFrame.encode({ ops }).finish().slice(0, -1)) },
);

describe("BinaryFrameReader", () => {
  it("remembers at most MAX_NAMES stream names, however many a client sends, and still reads every one", () => {
    const reader = new BinaryFrameReader();
    for (let f = 0; f < 40; f++) {
      const ops = Array.from({ length: 256 }, (_, i) => ({ tokens: { stream: `s-${f}-${i}-${"x".repeat(12)}`, ids: [1] } }));
      const r = meaning(reader.read(s.ClientFrame.encode({ ops }).finish(), s, 1e6));
      expect(r.ops.map((o) => (o as { stream?: string }).stream)).toEqual(ops.map((o) => o.tokens.stream));
      expect(reader.cachedNames).toBeLessThanOrEqual(MAX_NAMES);
    }
    expect(reader.cachedNames).toBeGreaterThan(0);
  });

  it("reading frames one after another gives what reading each afresh gives", () => {
    fc.assert(
      fc.property(fc.array(frame, { minLength: 1, maxLength: 12 }), fc.integer({ min: 1, max: 5000 }), (frames, maxIds) => {
        const reader = new BinaryFrameReader();
        for (const f of frames) expect(meaning(reader.read(f, s, maxIds))).toEqual(meaning(readBinaryFrame(f, s, maxIds)));
      }),
      fcParams(200),
    );
  });

  it("says what protobufjs decodes, op for op (handles included), across frames of any size", () => {
    const reader = new BinaryFrameReader();
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const bytes = s.ClientFrame.encode({ ops }).finish();
        const want = (
          s.ClientFrame.toObject(s.ClientFrame.decode(bytes), { defaults: true }) as { ops: Record<string, Record<string, unknown>>[] }
        ).ops.map((o) =>
          o.tokens
            ? { kind: 2, stream: o.tokens.stream, handle: o.tokens.handle, ids: o.tokens.ids }
            : o.open
              ? { kind: 1, ...o.open }
              : { kind: 3, ...o.close },
        );
        const got = meaning(reader.read(bytes, s, 1e7));
        expect(got.fatal).toBeNull();
        expect(got.ops).toEqual(want);
      }),
      fcParams(100),
    );
  });

  it("Open and Close: the last of a repeated field wins; a known field of another wire type and unknown fields are skipped", () => {
    const str = (f: number, t: string) => [(f << 3) | 2, Buffer.byteLength(t), ...Buffer.from(t)];
    const open = [
      ...str(1, "a"),
      ...str(1, "b"),
      0x10,
      0x05,
      ...str(2, "none"),
      0x20,
      0x01,
      0x20,
      0x00,
      ...str(9, "x"),
      0x48,
      0x07,
      0xa0,
      0x01,
      0x09,
      ...str(8, "m"),
    ];
    const close = [0x1a, 0x00, ...str(2, "abort"), 0x18, 0x04, ...str(1, "b"), 0x12, 0x01, 0x41];
    const frame = Uint8Array.from([
      0x0a,
      open.length + 2,
      0x0a,
      open.length,
      ...open,
      0x0a,
      close.length + 2,
      0x1a,
      close.length,
      ...close,
    ]);
    for (const r of [readBinaryFrame(frame, s, 10), new BinaryFrameReader().read(frame, s, 10)]) {
      expect(meaning(r)).toEqual({
        fatal: null,
        errors: [],
        ops: [
          {
            kind: 1,
            stream: "b",
            handle: 7,
            role: "none",
            mode: "",
            whole_messages: false,
            non_strict: false,
            format: "",
            reasoning_field: "",
            model: "m",
            after_stop: "",
            tools: [],
            calls: "",
          },
          { kind: 3, stream: "b", handle: 4, reason: "A" },
        ],
      });
    }
    // a handle past uint32 refuses the frame
    const big = Uint8Array.from([0x0a, 0x0a, 0x1a, 0x08, 0x18, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00].slice(0, 12));
    expect(readBinaryFrame(big, s, 10).fatal?.code).toBe("bad_frame");
  });

  it("an op with a string that is not UTF-8 is dropped with its own error; the frame's other ops stand", () => {
    const str = (f: number, b: number[]) => [(f << 3) | 2, b.length, ...b];
    const op = (kind: number, body: number[]) => [0x0a, body.length + 2, (kind << 3) | 2, body.length, ...body];
    const frame = Uint8Array.from([
      ...op(2, [...str(1, [0x61]), ...str(2, [5, 6])]), // tokens "a" [5, 6]
      ...op(1, [...str(1, [0x62]), ...str(2, [0xff]), 0x48, 0x02]), // open "b", role not UTF-8, handle 2
      ...op(3, [...str(1, [0x61]), ...str(2, [0xed, 0xa0, 0x80])]), // close "a", reason a lone surrogate
      ...op(2, [...str(1, [0xc3]), ...str(2, [7])]), // tokens with a cut name
      ...op(2, [0x18, 0x03, ...str(2, [8])]), // tokens for handle 3
    ]);
    for (const r of [readBinaryFrame(frame, s, 10), new BinaryFrameReader().read(frame, s, 10)]) {
      const m = meaning(r);
      expect(m.fatal).toBeNull();
      expect(m.ops).toEqual([
        { kind: 2, stream: "a", handle: 0, ids: [5, 6] },
        { kind: 2, stream: "", handle: 3, ids: [8] },
      ]);
      expect(m.errors).toEqual([
        { code: "bad_frame", message: "an open has a string field that is not valid UTF-8", stream: "b", handle: 2 },
        { code: "bad_frame", message: "a close has a string field that is not valid UTF-8", stream: "a", handle: 0 },
        { code: "bad_frame", message: "a tokens op has a string field that is not valid UTF-8", stream: "", handle: 0 },
      ]);
    }
  });

  it("a leading byte order mark is part of a name, as protobufjs and JSON keep it", () => {
    const name = "\uFEFFa-\u00e9";
    const f = s.ClientFrame.encode({
      ops: [{ open: { stream: name } }, { tokens: { stream: name, ids: [1] } }, { close: { stream: name, reason: "\uFEFFeos" } }],
    }).finish();
    for (const r of [readBinaryFrame(f, s, 10), new BinaryFrameReader().read(f, s, 10)]) {
      expect(r.ops.toArray().map((o) => o.stream)).toEqual([name, name, name]);
      expect((r.ops.toArray()[2] as { reason: string }).reason).toBe("\uFEFFeos");
    }
  });

  it("a frame of many ops, then small ones: the reused op arrays grow and start over", () => {
    const reader = new BinaryFrameReader();
    const big = Array.from({ length: 5000 }, (_, i) => ({ tokens: { handle: i + 1, ids: [i] } }));
    const r = reader.read(s.ClientFrame.encode({ ops: big }).finish(), s, 1e6);
    expect(r.ops.n).toBe(5000);
    expect(r.ops.toArray()[4999]).toMatchObject({ kind: 2, handle: 5000, stream: "" });
    expect(Array.from(r.ids.subarray(r.ops.starts[4999], r.ops.ends[4999]))).toEqual([4999]);
    const small = meaning(
      reader.read(
        s.ClientFrame.encode({ ops: [{ close: { stream: "z", handle: 3 } }, { tokens: { stream: "y", ids: [7] } }] }).finish(),
        s,
        1e6,
      ),
    );
    expect(small.ops).toEqual([
      { kind: 3, stream: "z", handle: 3, reason: "" },
      { kind: 2, stream: "y", handle: 0, ids: [7] },
    ]);
  });

  it("an Open or Close op is let go at the next frame, not kept until its slot is reused", () => {
    const reader = new BinaryFrameReader();
    const first = reader.read(
      s.ClientFrame.encode({ ops: [{ tokens: { handle: 1, ids: [1] } }, { open: { stream: "a" } }, { close: { stream: "b" } }] }).finish(),
      s,
      1e6,
    );
    expect(first.ops.rare.filter((x) => x !== undefined)).toHaveLength(2);
    const next = reader.read(s.ClientFrame.encode({ ops: [{ tokens: { handle: 1, ids: [2] } }] }).finish(), s, 1e6);
    expect(next.ops.rare.filter((x) => x !== undefined)).toHaveLength(0);
  });

  it("stream names that recur come back equal, even when two names share a hash", () => {
    // two ASCII names with the same 32-bit FNV-1a hash, found by brute force
    const fnv = (t: string) => {
      let h = 0x811c9dc5;
      for (const b of Buffer.from(t)) h = Math.imul(h ^ b, 0x01000193);
      return h;
    };
    const seen = new Map<number, string>();
    let pair: [string, string] | null = null;
    for (let i = 0; !pair; i++) {
      const n = `s${i.toString(36)}`;
      const h = fnv(n);
      const other = seen.get(h);
      if (other !== undefined) pair = [other, n];
      else seen.set(h, n);
    }
    const [a, b] = pair;
    expect(a).not.toBe(b);
    const reader = new BinaryFrameReader();
    const names = [a, b, a, a, b, "请求-1", "请求-1", a, "x".repeat(40), b];
    for (const n of names) {
      const f = s.ClientFrame.encode({ ops: [{ tokens: { stream: n, ids: [1] } }, { tokens: { stream: n, ids: [2] } }] }).finish();
      const r = reader.read(f, s, 100);
      expect(r.ops.toArray().map((op) => op.stream)).toEqual([n, n]);
    }
  });

  it("reads packed and unpacked ids, and ids beyond uint32 as out of range", () => {
    const f = s.ClientFrame.encode({ ops: [{ tokens: { stream: "a", ids: [1, 127, 128, 16383, 16384, 200_005] } }] }).finish();
    const r = new BinaryFrameReader().read(f, s, 100);
    expect(meaning(r).ops).toEqual([{ kind: 2, stream: "a", handle: 0, ids: [1, 127, 128, 16383, 16384, 200_005] }]);
    // field 2 as one unpacked varint of 2^33: kept as 0xffffffff (not a token), not wrapped
    const unpacked = Uint8Array.from([0x0a, 0x0b, 0x12, 0x09, 0x0a, 0x01, 0x61, 0x10, 0x80, 0x80, 0x80, 0x80, 0x20]);
    for (const u of [readBinaryFrame(unpacked, s, 100), new BinaryFrameReader().read(unpacked, s, 100)]) {
      expect(meaning(u).ops).toEqual([{ kind: 2, stream: "a", handle: 0, ids: [0xffffffff] }]);
    }
  });
});
