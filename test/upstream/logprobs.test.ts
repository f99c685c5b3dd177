/**
 * vLLM's completions `logprobs` as the front reads them (src/upstream/vllm.ts
 * `readLogprobs`): with `return_tokens_as_token_ids` (vLLM's
 * `CompletionLogProbs`: `tokens`, `token_logprobs`, `top_logprobs` dicts keyed
 * "token_id:N", entrypoints/openai/completion/serving.py
 * `_create_completion_logprobs`), aligned with the chunk's ids, bounded.
 */
import { describe, expect, it } from "vitest";
import { MAX_TOP_LOGPROBS } from "../../src/upstream/engine.js";
import { readLogprobs } from "../../src/upstream/vllm.js";

describe("readLogprobs", () => {
  it("reads each id's log probability and its alternatives by id", () => {
    const v = {
      tokens: ["token_id:13225", "token_id:0"],
      token_logprobs: [-0.25, -1.5],
      top_logprobs: [{ "token_id:13225": -0.25, "token_id:9": -2 }, { "token_id:0": -1.5 }],
      text_offset: [0, 5],
    };
    expect(readLogprobs(v, 2)).toEqual([
      {
        logprob: -0.25,
        top: [
          { id: 13225, logprob: -0.25 },
          { id: 9, logprob: -2 },
        ],
      },
      { logprob: -1.5, top: [{ id: 0, logprob: -1.5 }] },
    ]);
  });

  it("takes what it cannot read as missing, never throws, and keeps at most 20 alternatives", () => {
    expect(readLogprobs(null, 3)).toBeUndefined();
    expect(readLogprobs({ token_logprobs: "x" }, 3)).toBeUndefined();
    expect(
      readLogprobs({ token_logprobs: [null, -1], top_logprobs: [null, { nope: -1, "token_id:-3": -1, "token_id:7": "x" }] }, 3),
    ).toEqual([null, { logprob: -1, top: [] }, null]);
    const many = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`token_id:${i}`, -i]));
    expect(readLogprobs({ token_logprobs: [-1], top_logprobs: [many] }, 1)![0]!.top).toHaveLength(MAX_TOP_LOGPROBS);
  });
});
