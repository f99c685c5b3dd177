/**
 * The faithful vLLM stand-in (test/e2e/stand-ins/vllm.ts) against what vLLM
 * does: the contract's cases (test/e2e/vllm-contract.ts) for the current
 * wire, then what only the stand-in models: older vLLM profiles, engine
 * faults, health of a dead engine, the recording of requests. Each test
 * names the vLLM file (repository vllm-project/vllm, at the commit the
 * stand-in's header cites) and the code it mirrors. Plain `fetch` to
 * 127.0.0.1.
 */
import { describe, expect, it } from "vitest";
import { startVllm, type VllmStandIn } from "./stand-ins/vllm.js";
import { chunksOf, idsOf, plain, vllmContract } from "./vllm-contract.js";

const { engine, post, events, body } = vllmContract<VllmStandIn>({
  start: () => startVllm({ maxModelLen: 1000 }),
  reset: (vllm) => {
    vllm.set({ profile: "current", maxModelLen: 1000, healthy: true, streamInterval: 1 });
    vllm.script({});
  },
  prompt: [200006, 1428, 200008, 12, 200007, 200006, 173781],
  // the stand-in's placeholder detokenizer and tokenizer (defaultDecode, defaultTokenize)
  text: (ids) => ids.map((id) => `[${id}]`).join(""),
  tokenize: (text) => Array.from(Buffer.from(text, "utf8")),
  abort: (vllm, ids) => vllm.script({ tokens: [...ids, ...plain(5, 2000)], abortAfter: ids.length }),
});

describe("older vLLM profiles", () => {
  // serving_engine.py @7ded96b3 _validate_input; the flat ErrorResponse (object "error") of vLLM before PR #22099 (v0.10.1)
  it("has the older context-length wording and flat shape on v0.10.0", async () => {
    engine().set({ profile: "v0.10.0" });
    const res = await post(body({ prompt: plain(990, 10) }));
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      object: "error",
      message:
        "This model's maximum context length is 1000 tokens. However, you requested 1006 tokens (990 in the messages, 16 in the completion). Please reduce the length of the messages or completion.",
      type: "BadRequestError",
      param: null,
      code: 400,
    });
  });

  // serving_completion.py @00463e62: `if finish_reason == "abort": raise ValueError(output.stop_reason)` -> error frame
  it("turns an abort into an error frame on v0.10.2", async () => {
    engine().set({ profile: "v0.10.2" });
    engine().script({ tokens: plain(8), abortAfter: 3 });
    const evs = await events(body());
    expect(evs.slice(-2)).toEqual([{ error: { message: "None", type: "BadRequestError", param: null, code: 400 } }, "[DONE]"]);
  });

  // a vLLM before return_token_ids (PR #22587): engine/protocol.py OpenAIBaseModel extra="allow": unknown fields
  // ignored (a warning in the log); the stream choice has text only
  it("answers 200 with text and no token ids before return_token_ids (v0.10.0)", async () => {
    engine().set({ profile: "v0.10.0" });
    engine().script({ tokens: [5, 6, 200002] });
    const evs = await events(body());
    const cs = chunksOf(evs);
    expect(cs.length).toBeGreaterThan(0);
    for (const c of cs) {
      expect("token_ids" in c.choices[0]).toBe(false);
      expect("prompt_token_ids" in c.choices[0]).toBe(false);
      expect(c.usage).toBeNull(); // exclude_unset=False
    }
    expect(cs.map((c) => c.choices[0].text).join("")).toBe("[5][6]");
    expect(evs.at(-1)).toBe("[DONE]");
  });
});

describe("engine faults", () => {
  // v1/engine/__init__.py FINISH_REASON_STRINGS "error"; serving base _raise_if_error -> GenerationError("Internal server error");
  // completion/serving.py `except GenerationError` -> data: {"error": …}, then `yield "data: [DONE]"`
  it("turns an engine error into an error frame, then [DONE]", async () => {
    engine().script({ tokens: plain(8), errorAfter: 2 });
    const evs = await events(body());
    expect(idsOf(evs)).toEqual(plain(2));
    expect(evs.slice(-2)).toEqual([
      { error: { message: "Internal server error", type: "InternalServerError", param: null, code: 500 } },
      "[DONE]",
    ]);
  });

  // completion/serving.py `except Exception` -> create_streaming_error_response(e), then [DONE]
  it("sends a mid-stream error frame followed by [DONE]", async () => {
    engine().script({ tokens: plain(8), midStreamError: { afterChunks: 2, message: "boom" } });
    const evs = await events(body());
    expect(chunksOf(evs)).toHaveLength(2);
    expect(evs.slice(-2)).toEqual([{ error: { message: "boom", type: "InternalServerError", param: null, code: 500 } }, "[DONE]"]);
  });
});

describe("what else the stand-in answers", () => {
  // serve/instrumentator/health.py: 503 on EngineDeadError
  it("GET /health: 503 when the engine is dead", async () => {
    engine().set({ healthy: false });
    expect((await fetch(`${engine().url}/health`)).status).toBe(503);
  });

  // prometheus_client writes every sample value as a float
  it("GET /metrics: values as floats, as prometheus_client writes them", async () => {
    const text = await (await fetch(`${engine().url}/metrics`)).text();
    expect(text).toMatch(/^vllm:num_requests_running\{engine="0",model_name="openai\/gpt-oss-20b"\} \d+\.0$/m);
  });

  it("records every request: path, headers, body", async () => {
    engine().script({ tokens: [5, 200002] });
    await events(body({ max_tokens: 7 }));
    const last = engine().completions().at(-1)!;
    expect(last.path).toBe("/v1/completions");
    expect(last.headers["content-type"]).toBe("application/json");
    expect(last.body).toMatchObject({ max_tokens: 7, return_token_ids: true });
    expect(last.events.at(-1)).toBe("[DONE]");
    expect((await fetch(`${engine().url}/nope`)).status).toBe(404);
    expect(engine().received.at(-1)!.path).toBe("/nope");
  });
});
