/** The hand-written event encoders against protobufjs and JSON.parse. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { DeltaEvent, HarmonyEvent } from "../../src/core/events.js";
import { decodeServerFrame, fromWire, toWire, type StreamRef } from "../../src/protocol/events.js";
import { deltaJson, FrameWriter, handleField, jsonRef, streamField } from "../../src/protocol/frame-writer.js";
import { schema } from "../../src/protocol/schema.js";
import { expectSameBytes, fcParams } from "../helpers.js";

const s = schema();
const kinds = ["reasoning", "content", "commentary", "tool_args", "other"] as const;
const delta = fc.record({
  type: fc.constant("delta" as const),
  index: fc.oneof(fc.constant(0), fc.nat(), fc.integer({ min: 128, max: 2 ** 31 - 1 })),
  kind: fc.constantFrom(...kinds),
  text: fc.oneof(fc.string(), fc.string({ unit: "grapheme" }), fc.constant(""), fc.constant('😀 家族 \u0000 "q" \\ \n')),
});
const name = fc.oneof(fc.string({ minLength: 0, maxLength: 40 }), fc.constant("请求-1"), fc.constant("x".repeat(300)));
/** How an event names its stream: by name, or by a handle (streams opened with one). */
const ref: fc.Arbitrary<StreamRef> = fc.oneof(
  name.map((stream) => ({ stream })),
  fc.oneof(fc.integer({ min: 1, max: 127 }), fc.integer({ min: 1, max: 0xffffffff })).map((handle) => ({ handle })),
);
const fieldOf = (r: StreamRef) => ("handle" in r ? handleField(r.handle) : streamField(r.stream));

const text = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.string({ unit: "grapheme", maxLength: 20 }),
  fc.constant(""),
  fc.constant("functions.get_weather"),
  fc.constant("x".repeat(200)),
);
const maybe = fc.option(text, { nil: null });
const u32 = fc.oneof(fc.nat({ max: 300 }), fc.integer({ min: 0, max: 0xffffffff }));
/** The events FrameWriter.common writes itself (and a few it hands back). */
const common: fc.Arbitrary<HarmonyEvent> = fc.oneof(
  fc.record({
    type: fc.constant("message_start" as const),
    index: u32,
    role: text,
    name: maybe,
    channel: maybe,
    recipient: maybe,
    content_type: maybe,
  }),
  fc.record({
    type: fc.constant("tool_call_start" as const),
    index: u32,
    call_index: u32,
    id: text,
    recipient: text,
    namespace: maybe,
    name: text,
    channel: maybe,
    content_type: maybe,
  }),
  fc.record({
    type: fc.constant("message_end" as const),
    index: u32,
    stop: fc.constantFrom("end", "call", "return", "eos"),
  }) as fc.Arbitrary<HarmonyEvent>,
  fc.record({
    type: fc.constant("done" as const),
    finish_reason: fc.constantFrom("stop", "tool_calls", "length", "abort", "error"),
    tokens: u32,
    messages: u32,
    recoveries: u32,
    reasoning_tokens: u32,
  }) as fc.Arbitrary<HarmonyEvent>,
  fc.record(
    {
      type: fc.constant("recovery" as const),
      at: u32,
      kind: fc.constantFrom("header_restart", "stray_stop", "after_stop"),
      detail: text,
      raw: text,
      count: fc.integer({ min: 2, max: 1_000_000 }),
    },
    { requiredKeys: ["type", "at", "kind", "detail"] },
  ) as fc.Arbitrary<HarmonyEvent>,
  fc.record({
    type: fc.constant("tool_call_end" as const),
    index: u32,
    call_index: u32,
    id: text,
    name: text,
    arguments: fc.oneof(text, fc.constant('{"city":"Oslo"}'), fc.constant("x".repeat(70_000))),
    valid_json: fc.boolean(),
  }) as fc.Arbitrary<HarmonyEvent>,
  fc.constant({
    type: "message_end",
    index: 1,
    stop: "end",
    message: { role: "assistant", channel: "final", content: "hi" },
  } as HarmonyEvent),
);

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
      fcParams(300),
    );
  });

  it("a handle's field is its tag and varint, at every varint length", () => {
    for (const h of [1, 127, 128, 16383, 16384, 2097151, 2097152, 268435455, 268435456, 0xffffffff]) {
      const bytes = s.Event.encode({ handle: h }).finish();
      expect(Buffer.from(handleField(h), "latin1"), String(h)).toEqual(Buffer.from(bytes));
    }
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
      fcParams(300),
    );
  });

  it("writes message_start, tool_call_start, tool_call_end, recovery, message_end and done byte for byte as protobufjs, and hands back the rest", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(ref, common), { minLength: 1, maxLength: 8 }), (items) => {
        const w = new FrameWriter();
        const want = new FrameWriter();
        for (const [r, ev] of items) {
          const pb = s.Event.encode(toWire(r, ev)).finish();
          want.event(pb);
          if (!w.common(fieldOf(r), ev)) {
            expect(ev.type === "message_end" && ev.message !== undefined).toBe(true);
            w.event(pb);
          }
        }
        // the same bytes, but for an empty name: protobufjs writes the empty
        // field, the writer leaves it out (proto3's default; decoders read
        // both alike, and the service never has an empty name). Event
        // strings come from UTF-8 decoding, so they hold no lone surrogates
        // (which protobufjs and Buffer would write differently).
        const got = w.take();
        const exp = want.take();
        if (items.every(([r]) => !("stream" in r && r.stream === ""))) expectSameBytes(got, exp);
        else
          expect(decodeServerFrame(s, got).map((e) => fromWire(e)!.event)).toEqual(
            decodeServerFrame(s, exp).map((e) => fromWire(e)!.event),
          );
        expect(decodeServerFrame(s, got).length).toBe(items.length);
      }),
      fcParams(400),
    );
  });

  it("slabbed, hands out views batch after batch with the same bytes as copies, earlier views untouched", () => {
    // batches of up to 40 deltas of up to 3 KB: slabs of 64 KiB fill up, and a batch can outgrow one
    const batch = fc.record({ items: fc.array(fc.tuple(ref, delta), { maxLength: 40 }), pad: fc.nat({ max: 3000 }), keep: fc.boolean() });
    fc.assert(
      fc.property(fc.array(batch, { minLength: 1, maxLength: 30 }), (batches) => {
        const slabbed = new FrameWriter(true);
        const plain = new FrameWriter();
        const views: { view: Uint8Array; copy: Buffer }[] = [];
        for (const b of batches) {
          for (const [r, ev] of b.items) {
            const d = { ...(ev as DeltaEvent), text: (ev as DeltaEvent).text + "x".repeat(b.pad) };
            slabbed.deltaOf(fieldOf(r), d);
            plain.deltaOf(fieldOf(r), d);
          }
          if (!b.keep) {
            // a batch that did not finish leaves nothing behind
            slabbed.clear();
            plain.clear();
            continue;
          }
          const view = slabbed.take();
          const copy = Buffer.from(plain.take());
          expectSameBytes(view, copy);
          views.push({ view, copy });
        }
        for (const { view, copy } of views) expectSameBytes(view, copy, "an earlier view");
      }),
      fcParams(200),
    );
  });

  it("writes JSON that parses to the wire event", () => {
    fc.assert(
      fc.property(ref, delta, (r, ev) => {
        expect(JSON.parse(deltaJson(jsonRef(r), ev as DeltaEvent))).toEqual({
          ...r,
          delta: { index: ev.index, kind: ev.kind, text: ev.text },
        });
      }),
      fcParams(300),
    );
  });
});
