/** The hand-written delta encoder against protobufjs and JSON.parse. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { DeltaEvent } from "../src/core/events.js";
import { decodeServerFrame, toWire, type StreamRef } from "../src/protocol/events.js";
import { deltaJson, FrameWriter, handleField, jsonRef, streamField } from "../src/protocol/fast-events.js";
import { schema } from "../src/protocol/schema.js";

const s = schema();
const kinds = ["reasoning", "content", "commentary", "tool_args", "other"] as const;
const delta = fc.record({
  type: fc.constant("delta" as const),
  index: fc.oneof(fc.constant(0), fc.nat(), fc.integer({ min: 128, max: 2 ** 31 - 1 })),
  kind: fc.constantFrom(...kinds),
  text: fc.oneof(fc.string(), fc.string({ unit: "grapheme" }), fc.constant(""), fc.constant("😀 家族 \u0000 \"q\" \\ \n")),
});
const name = fc.oneof(fc.string({ minLength: 0, maxLength: 40 }), fc.constant("请求-1"), fc.constant("x".repeat(300)));
/** How an event names its stream: by name, or by a handle (streams opened with one). */
const ref: fc.Arbitrary<StreamRef> = fc.oneof(
  name.map((stream) => ({ stream })),
  fc.oneof(fc.integer({ min: 1, max: 127 }), fc.integer({ min: 1, max: 0xffffffff })).map((handle) => ({ handle })),
);
const fieldOf = (r: StreamRef) => ("handle" in r ? handleField(r.handle) : streamField(r.stream));

describe("FrameWriter", () => {
  it("writes deltas that protobufjs decodes to the same wire events, and frames concatenate", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(name, delta), { minLength: 1, maxLength: 8 }), (items) => {
        const w = new FrameWriter();
        for (const [n, ev] of items) w.delta(n, ev as DeltaEvent);
        const got = decodeServerFrame(s, w.take());
        const want = decodeServerFrame(s, s.ServerFrame.encode({ events: items.map(([n, ev]) => toWire(n, ev as DeltaEvent)) }).finish());
        expect(got).toEqual(want);
      }),
      { numRuns: 300 },
    );
  });

  it("writes deltas of streams named by name or by handle as protobufjs encodes them", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(ref, delta), { minLength: 1, maxLength: 8 }), (items) => {
        const w = new FrameWriter();
        for (const [r, ev] of items) w.deltaOf(fieldOf(r), ev as DeltaEvent);
        const got = decodeServerFrame(s, w.take());
        const want = decodeServerFrame(s, s.ServerFrame.encode({ events: items.map(([r, ev]) => toWire(r, ev as DeltaEvent)) }).finish());
        expect(got).toEqual(want);
        items.forEach(([r], i) => expect("handle" in r ? got[i]!.handle : got[i]!.stream).toBe("handle" in r ? r.handle : r.stream));
      }),
      { numRuns: 300 },
    );
  });

  it("writes JSON that parses to the wire event", () => {
    fc.assert(
      fc.property(ref, delta, (r, ev) => {
        expect(JSON.parse(deltaJson(jsonRef(r), ev as DeltaEvent))).toEqual({ ...r, delta: { index: ev.index, kind: ev.kind, text: ev.text } });
      }),
      { numRuns: 300 },
    );
  });
});
