/**
 * Chat's `stop` on the sidecar's side of the parse (src/openai/stop.ts): the
 * answer ends before the first stop string to end in it, the one earliest in
 * the list when two end together, the rule of vLLM's detokenizer
 * (vllm/v1/engine/detokenizer.py @ e372329d90d7d12e3957ac21c4097fd9bb79192c,
 * `check_stop_strings` after each step), however the answer arrives in pieces.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { StopStrings } from "../../src/openai/stop.js";

/** The answer cut at the first stop string to end in it (ties: list order), or whole. */
function reference(text: string, stops: string[]): { text: string; stopped: boolean } {
  for (let end = 1; end <= text.length; end++) {
    for (const s of stops) if (s !== "" && text.slice(0, end).endsWith(s)) return { text: text.slice(0, end - s.length), stopped: true };
  }
  return { text, stopped: false };
}

function run(pieces: string[], stops: string[]): { text: string; stopped: boolean } {
  const f = StopStrings.of(stops)!;
  let out = "";
  for (const p of pieces) out += f.push(p);
  out += f.flush();
  return { text: out, stopped: f.stopped };
}

describe("StopStrings", () => {
  it("cuts before the stop string, holds back what may begin one, and lets it go when it does not", () => {
    const f = StopStrings.of(["END"])!;
    expect(f.push("Mild and cl")).toBe("Mild and cl");
    expect(f.push("ear. E")).toBe("ear. "); // "E" may begin END
    expect(f.push("N")).toBe("");
    expect(f.push("TRY")).toBe("ENTRY"); // it did not
    expect(f.push(" and END of it")).toBe(" and ");
    expect(f.stopped).toBe(true);
    expect(f.push("more")).toBe("");
    expect(f.flush()).toBe("");
  });

  it("a string or a list; empty strings are no stop strings; none at all is null", () => {
    expect(StopStrings.of(null)).toBeNull();
    expect(StopStrings.of([])).toBeNull();
    expect(StopStrings.of([""])).toBeNull();
    expect(run(["ab", "cd"], ["c"])).toEqual({ text: "ab", stopped: true });
    expect(StopStrings.of("x")).not.toBeNull();
  });

  it("the stop string that ends first wins, not the one that begins first; ties go to the list's order", () => {
    expect(run(["abcd"], ["abcd", "bc"])).toEqual({ text: "a", stopped: true });
    expect(run(["xyz"], ["yz", "z"])).toEqual({ text: "x", stopped: true });
    expect(run(["xyz"], ["z", "yz"])).toEqual({ text: "xy", stopped: true });
  });

  it("flush ends the text: a stop string does not reach across it (a tool call between two texts)", () => {
    const f = StopStrings.of(["ab"])!;
    expect(f.push("xa")).toBe("x");
    expect(f.flush()).toBe("a");
    expect(f.push("b")).toBe("b");
  });

  it("matches the reference however the answer is cut into pieces (property)", () => {
    const alphabet = fc.constantFrom("a", "b", "c", "é", "喵", "\u0301");
    const str = (max: number) => fc.array(alphabet, { maxLength: max }).map((a) => a.join(""));
    fc.assert(
      fc.property(
        str(40),
        fc.array(str(5), { minLength: 1, maxLength: 4 }),
        fc.array(fc.nat(40), { maxLength: 8 }),
        (text, stops, cuts) => {
          fc.pre(stops.some((s) => s !== ""));
          const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((x, y) => x - y);
          const pieces: string[] = [];
          let from = 0;
          for (const c of [...at, text.length]) {
            pieces.push(text.slice(from, c));
            from = c;
          }
          expect(run(pieces, stops)).toEqual(reference(text, stops));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("16 hostile stop strings (1024 characters, one short of matching over and over) over a million characters: every one comes out", () => {
    // each character is looked at once per stop string: a million characters pass quickly even so
    const stop = "a".repeat(1023) + "b";
    const f = StopStrings.of(Array.from({ length: 16 }, () => stop))!;
    let out = 0;
    for (let i = 0; i < 1000; i++) out += f.push("a".repeat(1000)).length;
    out += f.flush().length;
    expect(out).toBe(1_000_000);
  });
});
