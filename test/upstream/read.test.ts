/**
 * The engine's answers as untrusted input (src/upstream/read.ts): ids that are
 * not integers inside the vocabulary, choice indexes not asked for and usage
 * counts that are not counts are a 502 `upstream_bad_response` naming the bad
 * value, never dropped; each choice is cut at the limit the request asked.
 */
import { describe, expect, it } from "vitest";
import { UpstreamError } from "../../src/upstream/engine.js";
import { checkIds, checkIndex, checkUsage, ChoiceLimits } from "../../src/upstream/read.js";

const SIZE = 201089;

function refused(f: () => unknown): UpstreamError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(UpstreamError);
    expect((e as UpstreamError).code).toBe("upstream_bad_response");
    expect((e as UpstreamError).status).toBe(502);
    return e as UpstreamError;
  }
  throw new Error("not refused");
}

describe("checkIds", () => {
  it("takes integers in [0, size)", () => {
    expect(checkIds([0, 1, 200002, SIZE - 1], SIZE)).toEqual([0, 1, 200002, SIZE - 1]);
    expect(checkIds([], SIZE)).toEqual([]);
  });

  it.each([[-1], [1.5], ["x"], [2 ** 32], [null], [SIZE], [Number.NaN], [true], [[3]]])("refuses %j, naming it", (bad) => {
    const e = refused(() => checkIds([5, bad, 6], SIZE));
    expect(e.message).toMatch(/at 1$/);
  });

  it("refuses what is not an array", () => {
    refused(() => checkIds("1,2", SIZE));
    refused(() => checkIds({ 0: 1 }, SIZE));
  });
});

describe("checkIndex", () => {
  it("a choice index the request asked for; absent is 0", () => {
    expect(checkIndex(undefined, 1)).toBe(0);
    expect(checkIndex(2, 3)).toBe(2);
    refused(() => checkIndex(3, 3));
    refused(() => checkIndex(-1, 3));
    refused(() => checkIndex("0", 3));
  });
});

describe("checkUsage", () => {
  it("counts that are counts, and only the fields the sidecar reads", () => {
    expect(checkUsage(null)).toBeNull();
    expect(checkUsage(undefined)).toBeNull();
    expect(
      checkUsage({
        prompt_tokens: 3,
        completion_tokens: 4,
        total_tokens: 7,
        reasoning_tokens: 9,
        prompt_tokens_details: { cached_tokens: 2 },
      }),
    ).toEqual({ prompt_tokens: 3, completion_tokens: 4, total_tokens: 7, prompt_tokens_details: { cached_tokens: 2 } });
    expect(checkUsage({ prompt_tokens: 3, completion_tokens: 4, total_tokens: null })).toEqual({ prompt_tokens: 3, completion_tokens: 4 });
    // UsageInfo.completion_tokens is Optional[int] (trtllm-serve openai_protocol.py @ 0076e939, SGLang protocol.py @ 004c82e0):
    // counts left out are no counts, and the sidecar counts the ids itself
    expect(checkUsage({ prompt_tokens: 3, completion_tokens: null })).toBeNull();
    expect(checkUsage({ prompt_tokens: 3 })).toBeNull();
  });

  it.each([
    [{ prompt_tokens: "3", completion_tokens: 4 }],
    [{ prompt_tokens: "3" }],
    [{ prompt_tokens: -1, completion_tokens: 4 }],
    [{ prompt_tokens: 3, completion_tokens: 1.5 }],
    [{ prompt_tokens: 3, completion_tokens: 4, total_tokens: "7" }],
    ["3"],
    [[3, 4]],
  ])("refuses %j", (u) => {
    refused(() => checkUsage(u));
  });
});

describe("ChoiceLimits", () => {
  it("cuts each choice at the limit with length, and says when every choice was cut here", () => {
    const l = new ChoiceLimits(2, 5);
    expect(l.take({ index: 0, token_ids: [1, 2, 3], finish_reason: null })).toEqual({
      index: 0,
      token_ids: [1, 2, 3],
      finish_reason: null,
    });
    expect(l.take({ index: 0, token_ids: [4, 5, 6, 7], finish_reason: null })).toEqual({
      index: 0,
      token_ids: [4, 5],
      finish_reason: "length",
    });
    expect(l.take({ index: 0, token_ids: [8], finish_reason: null })).toBeNull(); // past its end: not heard
    // a choice nothing is cut from is passed on as it came (no copy a step)
    const whole = { index: 1, token_ids: [9], finish_reason: null, logprobs: [null] };
    expect(l.take(whole)).toBe(whole);
    expect(l.overrun).toBe(false);
    expect(l.take({ index: 1, token_ids: [1, 2, 3, 4, 5], finish_reason: "stop" })).toEqual({
      index: 1,
      token_ids: [1, 2, 3, 4],
      finish_reason: "length",
    });
    expect(l.overrun).toBe(true);
    expect(l.count(0)).toBe(5);
    expect(l.count(1)).toBe(5);
  });

  it("a finish the engine sends again is not heard twice; no limit cuts nothing", () => {
    const l = new ChoiceLimits(1, null);
    expect(l.take({ index: 0, token_ids: new Array<number>(100_000).fill(1), finish_reason: null })!.token_ids).toHaveLength(100_000);
    expect(l.take({ index: 0, token_ids: [], finish_reason: "stop" })!.finish_reason).toBe("stop");
    expect(l.take({ index: 0, token_ids: [7], finish_reason: "stop" })).toBeNull();
    expect(l.overrun).toBe(false);
  });

  it("ids made again from text (standing for more of the engine's) are never cut inside", () => {
    const l = new ChoiceLimits(1, 4);
    expect(l.take({ index: 0, token_ids: [1, 2], finish_reason: null }, 3)).toEqual({ index: 0, token_ids: [1, 2], finish_reason: null });
    expect(l.take({ index: 0, token_ids: [3, 4], finish_reason: null }, 3)).toEqual({ index: 0, token_ids: [], finish_reason: "length" });
  });
});
