/** The wire reader's varints against protobufjs, which writes what clients send. */
import fc from "fast-check";
import protobuf from "protobufjs";
import { describe, expect, it } from "vitest";
import { Reader, WireError } from "../../src/protocol/wire.js";
import { fcParams } from "../helpers.js";

/** `v` as protobufjs writes a uint64 varint. */
function encoded(v: number): Uint8Array {
  return protobuf.Writer.create().uint64(v).finish();
}

// one byte, two bytes (the inline paths), and everything up to 2^53
const value = fc.oneof(
  fc.integer({ min: 0, max: 0x7f }),
  fc.integer({ min: 0x80, max: 0x3fff }),
  fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
);

describe("Reader.varint", () => {
  it("reads what protobufjs writes, at any offset, and ends where the varint ends", () => {
    fc.assert(
      fc.property(value, fc.nat({ max: 3 }), fc.nat({ max: 3 }), (v, before, after) => {
        const bytes = encoded(v);
        const buf = new Uint8Array(before + bytes.length + after).fill(0x81);
        buf.set(bytes, before);
        const r = new Reader(buf, before, before + bytes.length);
        expect(r.varint()).toBe(v);
        expect(r.pos).toBe(before + bytes.length);
      }),
      fcParams(500),
    );
  });

  it("refuses a varint cut short by its field's end, whatever bytes follow in the buffer", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0x80, max: Number.MAX_SAFE_INTEGER }), fc.nat(), (v, cutAt) => {
        const bytes = encoded(v);
        const cut = 1 + (cutAt % (bytes.length - 1)); // 1 .. length-1 bytes of it
        // the buffer still holds the rest: only `end` says the field stops
        const r = new Reader(bytes, 0, cut);
        expect(() => r.varint()).toThrow(WireError);
      }),
      fcParams(500),
    );
  });

  it("refuses a varint longer than 10 bytes", () => {
    const r = new Reader(new Uint8Array(11).fill(0x80), 0, 11);
    expect(() => r.varint()).toThrow("varint longer than 10 bytes");
  });
});
