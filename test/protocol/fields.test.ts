/** fields.ts, the field numbers the hand-written reader and writer use, against the .proto itself (both ways). */
import protobuf from "protobufjs";
import { describe, expect, it } from "vitest";
import { FIELDS, tag, tagByte, Wire, wireType, type FieldSpec } from "../../src/protocol/fields.js";
import { OP_CLOSE, OP_OPEN, OP_RENDER, OP_TOKENS } from "../../src/protocol/ops.js";
import { schema } from "../../src/protocol/schema.js";

const s = schema();
const messages = Object.entries(FIELDS) as [string, Record<string, FieldSpec>][];
const typeOf = (message: string) => s.root.lookupType(`harmony.v1.${message}`);

/** The wire type protobufjs writes a field with (repeated scalars packed, as proto3 does). */
function protoWire(f: protobuf.Field): number {
  const basic = (protobuf.types.basic as Record<string, number | undefined>)[f.type];
  if (basic === undefined) return Wire.LEN; // a message (the table has no enums)
  return f.repeated && f.packed ? Wire.LEN : basic;
}

describe("fields.ts", () => {
  it("covers messages of harmony.proto", () => {
    for (const [message] of messages) expect(() => typeOf(message), message).not.toThrow();
  });

  it("every entry is the .proto's field: number, type, repeated, wire type", () => {
    for (const [message, fields] of messages) {
      const t = typeOf(message);
      for (const [name, spec] of Object.entries(fields)) {
        const f = t.fields[name];
        expect(f, `${message}.${name} is not in harmony.proto`).toBeDefined();
        expect(spec.no, `${message}.${name}`).toBe(f!.id);
        expect(spec.type, `${message}.${name}`).toBe(f!.type);
        expect(spec.repeated ?? false, `${message}.${name}`).toBe(f!.repeated);
        expect(wireType(spec), `${message}.${name}`).toBe(protoWire(f!));
      }
    }
  });

  it("every field of a message the table covers has its entry", () => {
    for (const [message, fields] of messages) {
      const t = typeOf(message);
      for (const f of t.fieldsArray) expect(fields[f.name], `${message}.${f.name} is missing from fields.ts`).toEqual(expect.anything());
      expect(Object.keys(fields).sort()).toEqual(Object.keys(t.fields).sort());
    }
  });

  it("tags are what protobufjs writes", () => {
    // a message with only that field set starts with the field's tag
    const sample = (spec: FieldSpec): unknown => {
      const one = spec.type === "string" ? "x" : spec.type === "bool" ? true : spec.type === "uint32" ? 1 : {};
      return spec.repeated ? [one] : one;
    };
    for (const [message, fields] of messages) {
      for (const [name, spec] of Object.entries(fields)) {
        const bytes = typeOf(message)
          .encode({ [name]: sample(spec) })
          .finish();
        const t = tag(spec.no, wireType(spec));
        expect(t, `${message}.${name}`).toBe((spec.no << 3) | wireType(spec));
        expect(bytes[0], `${message}.${name}`).toBe(t); // every field number here is below 16: a one-byte tag
        expect(tagByte(spec), `${message}.${name}`).toBe(t);
      }
    }
    expect(() => tagByte({ no: 16, type: "uint32" })).toThrow();
  });

  it("an op's kind is its field number in Op", () => {
    const op = typeOf("Op");
    expect([OP_OPEN, OP_TOKENS, OP_CLOSE, OP_RENDER]).toEqual(["open", "tokens", "close", "render"].map((n) => op.fields[n]!.id));
  });
});
