/**
 * `parse --batch`'s units (src/core/batch.ts): the lines a helper thread is
 * given travel as one buffer, the lines past the bound listed by index. A
 * unit gives back the very lines it was made of, empty lines and lines past
 * the bound (null) in their places, and its answers are those of the lines.
 */
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { BatchCases, linesOfUnit, unitOfLines, type LineBytes } from "../../src/core/batch.js";
import { fcParams, harmony } from "../helpers.js";

const { enc, vocab } = harmony();
const utf8 = new TextEncoder();

describe("batch units", () => {
  it("give back the lines they were made of: empty ones, lines past the bound (null) and any bytes but a newline", () => {
    const line = fc.oneof(
      fc.constant<LineBytes>(null),
      fc.uint8Array({ maxLength: 40 }).map((b) => b.map((x) => (x === 0x0a ? 0x20 : x))),
    );
    fc.assert(
      fc.property(fc.array(line, { maxLength: 30 }), fc.nat(1000), (lines, first) => {
        const u = unitOfLines(lines, first + 1);
        expect(u.firstLine).toBe(first + 1);
        expect(linesOfUnit(u).map((l) => (l === null ? null : [...l]))).toEqual(lines.map((l) => (l === null ? null : [...l])));
      }),
      fcParams(200),
    );
  });

  it("are answered as their lines are, line numbers counted from the unit's first", () => {
    const cases = () => new BatchCases(vocab, { mode: "resilient" }, "assistant");
    const good = JSON.stringify({ id: "a", tokens: enc.encode("<|channel|>final<|message|>Hi<|return|>") });
    const lines: LineBytes[] = [utf8.encode(good), utf8.encode(""), null, utf8.encode("not json"), utf8.encode(good)];
    const direct = cases().answerLines(lines, 7);
    expect(cases().answerUnit(unitOfLines(lines, 7))).toEqual(direct);
    expect(direct.bad).toBe(2);
    const answers = direct.text
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as { error?: { code: string; message: string } });
    expect(answers.map((a) => a.error?.code ?? "ok")).toEqual(["ok", "line_too_long", "bad_json", "ok"]);
    expect(answers[1]!.error!.message).toMatch(/^line 9 is longer than/);
    expect(answers[2]!.error!.message).toMatch(/^line 10 is not usable JSON/);
  });
});
