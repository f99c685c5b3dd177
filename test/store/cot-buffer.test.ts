/** The per-stream reasoning buffer behind CoT restoration. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CotBuffer, MAX_COT_BYTES } from "../../src/store/cot-buffer.js";
import { expectSameBytes, fcParams } from "../helpers.js";

/** What the buffer must hold: the texts joined, cut to whole characters within the byte limit. */
function model(texts: string[]): string {
  let out = "";
  let bytes = 0;
  for (const t of texts) {
    for (const ch of t) {
      const n = Buffer.byteLength(ch, "utf8");
      if (bytes + n > MAX_COT_BYTES) return out;
      out += ch;
      bytes += n;
    }
  }
  return out;
}

const text = fc.oneof(
  fc.string(),
  fc.string({ unit: "grapheme" }),
  fc.constant("é😀家"),
  fc.constant("x".repeat(5000)),
  fc.constant("家".repeat(3000)),
);

describe("CotBuffer", () => {
  it("holds the appended texts in order, up to the byte limit, never splitting a character", () => {
    fc.assert(
      fc.property(fc.array(text, { maxLength: 30 }), (texts) => {
        const b = new CotBuffer();
        for (const t of texts) b.append(t);
        // lone surrogates are written as U+FFFD, as any UTF-8 encoder does
        const want = model(texts.map((t) => Buffer.from(t, "utf8").toString("utf8")));
        expect(b.text()).toBe(want);
        expect(b.empty).toBe(want === "");
      }),
      fcParams(200),
    );
  });

  it("a memo is the text trimmed as String.prototype.trim trims it, in UTF-8", () => {
    const space = fc.constantFrom(" ", "\t", "\n", "\r", "\v", "\f", "\u00a0", "\u3000", "\u2028", "\ufeff", "\u1680");
    const part = fc.oneof(text, space, fc.constantFrom("家", "é", "x"));
    fc.assert(
      fc.property(fc.array(part, { maxLength: 12 }), (parts) => {
        const b = new CotBuffer();
        for (const t of parts) b.append(t);
        const want = b.text().trim();
        const memo = b.memo();
        if (want === "") expect(memo).toBeNull();
        else expectSameBytes(memo!, new TextEncoder().encode(want));
        // the same bytes handed to a sink without a copy, or no call at all
        const handed: Uint8Array[] = [];
        const kept = b.memoTo("call_1", (id, bytes, start, end) => {
          expect(id).toBe("call_1");
          handed.push(Uint8Array.from(bytes.subarray(start, end)));
        });
        expect(kept).toBe(want !== "");
        expect(handed.length).toBe(memo === null ? 0 : 1);
        if (memo !== null) expectSameBytes(handed[0]!, memo);
        // a copy: what the buffer does next does not change it
        const copy = memo === null ? null : Uint8Array.from(memo);
        b.clear();
        b.append("overwritten ".repeat(8));
        if (memo !== null) expectSameBytes(memo, copy!, "the memo after the buffer moved on");
      }),
      fcParams(300),
    );
  });

  it("separates messages by one blank line, clears for the next turn", () => {
    const b = new CotBuffer();
    b.separate();
    expect(b.text()).toBe("");
    b.append("first");
    b.separate();
    b.separate();
    b.append("second\n\n");
    b.separate();
    expect(b.text()).toBe("first\n\nsecond\n\n");
    b.clear();
    expect(b.empty).toBe(true);
    b.append("again");
    expect(b.text()).toBe("again");
  });

  it("a long reasoning stops at the limit and stays valid UTF-8", () => {
    const b = new CotBuffer();
    for (let i = 0; i < 20_000; i++) b.append(i % 2 ? "ab" : "家");
    const t = b.text();
    expect(Buffer.byteLength(t, "utf8")).toBeLessThanOrEqual(MAX_COT_BYTES);
    expect(Buffer.byteLength(t, "utf8")).toBeGreaterThan(MAX_COT_BYTES - 3);
    expect(t.includes("\uFFFD")).toBe(false);
  });
});
