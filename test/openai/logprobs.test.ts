/**
 * ContentLogprobs (src/openai/logprobs.ts): Chat's logprobs name the
 * answer's tokens only. Text with no header (docs/resilience.md, rule 13) is
 * the answer only when nothing else follows it: its tokens' logprobs wait
 * for that decision.
 */
import { describe, expect, it } from "vitest";
import { ContentLogprobs, type IdLogprob } from "../../src/openai/logprobs.js";
import { harmony } from "../helpers.js";

const { enc, vocab } = harmony();
const lp = (ids: number[]): IdLogprob[] => ids.map((_, i) => ({ logprob: -i / 10, top: [] }));

/** The content tokens' texts, the ids fed one chunk of `step` at a time. */
function contentOf(text: string, step: number): { streamed: string[]; all: string[] } {
  const ids = enc.encode(text);
  const lps = lp(ids);
  const c = new ContentLogprobs(vocab, 0);
  const streamed: string[] = [];
  for (let at = 0; at < ids.length; at += step)
    for (const t of c.push(ids.slice(at, at + step), lps.slice(at, at + step))) streamed.push(t.token);
  return { streamed, all: c.content.map((t) => t.token) };
}

describe("ContentLogprobs", () => {
  it("gives the final answer's tokens, not the reasoning's", () => {
    for (const step of [1, 3, 100]) {
      const r = contentOf(
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hi there<|return|>",
        step,
      );
      expect(r.all.join("")).toBe("Hi there");
      expect(r.streamed).toEqual(r.all);
    }
  });

  it("holds headerless text's tokens, and gives them once the completion ends with it as the answer", () => {
    for (const step of [1, 2, 100]) {
      const r = contentOf("I'm sorry, but I can't help with that.<|return|>", step);
      expect(r.all.join("")).toBe("I'm sorry, but I can't help with that.");
      expect(r.streamed).toEqual(r.all);
    }
  });

  it("drops headerless text's tokens when a message follows it (it was reasoning)", () => {
    for (const step of [1, 5, 100]) {
      const r = contentOf("We need to answer briefly.<|end|><|start|>assistant<|channel|>final<|message|>Yes.<|return|>", step);
      expect(r.all.join("")).toBe("Yes.");
      expect(r.streamed).toEqual(r.all);
    }
  });
});
