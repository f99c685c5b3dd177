/**
 * The faithful vLLM stand-in (test/e2e/stand-ins/vllm.ts) against what vLLM
 * does. Each test names the vLLM file (repository vllm-project/vllm, at the
 * commit the stand-in's header cites) and the code it mirrors. Plain `fetch`
 * to 127.0.0.1.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Json } from "../helpers.js";
import { startVllm, type VllmStandIn } from "./stand-ins/vllm.js";

type Obj = Record<string, Json>;

let vllm: VllmStandIn;

beforeAll(async () => {
  vllm = await startVllm({ maxModelLen: 1000 });
});
afterAll(async () => {
  await vllm.close();
});
beforeEach(() => {
  vllm.set({ profile: "current", maxModelLen: 1000, healthy: true, streamInterval: 1 });
  vllm.script({});
});

/** Plain ids 1..k (ordinary tokens: no stop, no EOS). */
const plain = (k: number, from = 1) => Array.from({ length: k }, (_, i) => from + i);
const PROMPT = [200006, 1428, 200008, 12, 200007, 200006, 173781];

/** The sidecar's own body (src/upstream/vllm.ts completionBody), with overrides. */
function body(over: Obj = {}): Obj {
  return {
    model: "openai/gpt-oss-20b",
    prompt: PROMPT,
    stream: true,
    stream_options: { include_usage: true },
    return_token_ids: true,
    skip_special_tokens: false,
    stop_token_ids: [200002, 200012],
    n: 1,
    ...over,
  };
}

async function post(b: Obj, path = "/v1/completions"): Promise<Response> {
  return fetch(`${vllm.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(b) });
}

/** The SSE `data:` payloads of a stream ("[DONE]" kept as the string). */
async function events(b: Obj): Promise<unknown[]> {
  const res = await post(b);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const text = await res.text();
  return text
    .split("\n\n")
    .filter((block) => block.startsWith("data: "))
    .map((block) => block.slice(6))
    .map((d) => (d === "[DONE]" ? d : (JSON.parse(d) as unknown)));
}

const chunksOf = (evs: unknown[]) =>
  evs.filter((e): e is Obj => typeof e === "object" && e !== null && Array.isArray((e as Obj).choices) && (e as Obj).choices.length > 0);
const idsOf = (evs: unknown[], choice = 0) =>
  chunksOf(evs).flatMap((c) => (c.choices[0].index === choice ? (c.choices[0].token_ids as number[]) : []));
const lastChoice = (evs: unknown[], choice = 0) =>
  chunksOf(evs)
    .filter((c) => c.choices[0].index === choice)
    .at(-1)!.choices[0];

describe("max_tokens", () => {
  // completion/protocol.py: `max_tokens: int | None = 16`; sched/utils.py check_stop: output >= max_tokens -> LENGTH
  it("defaults to 16 when absent", async () => {
    vllm.script({ tokens: plain(40) });
    const evs = await events(body());
    expect(idsOf(evs)).toEqual(plain(16));
    expect(lastChoice(evs)).toMatchObject({ finish_reason: "length", stop_reason: null });
  });

  // completion/protocol.py normalize_null_max_tokens: an explicit null becomes the field default (16)
  it("turns an explicit null into 16", async () => {
    vllm.script({ tokens: plain(40) });
    expect(idsOf(await events(body({ max_tokens: null })))).toHaveLength(16);
  });

  // serve/utils/api_utils.py get_max_tokens: min(max_model_len - prompt, max_tokens, ...); check_stop: num_tokens >= max_model_len -> LENGTH
  it("is capped by what is left of the context", async () => {
    vllm.script({ tokens: plain(40) });
    const evs = await events(body({ prompt: plain(990, 10), max_tokens: 10 }));
    expect(idsOf(evs)).toHaveLength(10);
    expect(lastChoice(evs).finish_reason).toBe("length");
  });
});

describe("the context-length 400", () => {
  // renderers/params.py TokenizeParams._token_len_check (max_input_tokens = max_model_len - (max_tokens or 0)),
  // exceptions.py VLLMValidationError.__str__, serve/utils/error_response.py create_error_response, engine/protocol.py ErrorResponse
  it("answers prompt + max_tokens beyond max_model_len with vLLM's body (current)", async () => {
    const res = await post(body({ prompt: plain(990, 10) })); // 990 + the default 16 > 1000
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: {
        message:
          "You passed 990 input tokens and requested 16 output tokens. However, the model's context length is only 1000 tokens, resulting in a maximum input length of 984 tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=990)",
        type: "BadRequestError",
        param: "input_tokens",
        code: 400,
      },
    });
  });

  // renderers/params.py TokenizeParams.__post_init__: max_output_tokens > max_total_tokens
  it("refuses max_tokens beyond max_model_len", async () => {
    const res = await post(body({ max_tokens: 5000 }));
    expect(res.status).toBe(400);
    const j = (await res.json()) as Obj;
    expect(j.error.param).toBe("max_tokens");
    expect(j.error.message).toContain("cannot be greater than max_model_len");
  });

  // serving_engine.py @7ded96b3 _validate_input; the flat ErrorResponse (object "error") of vLLM before PR #22099 (v0.10.1)
  it("has the older wording and flat shape on v0.10.0", async () => {
    vllm.set({ profile: "v0.10.0" });
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
});

describe("stop ids and EOS ids", () => {
  // sched/utils.py check_stop: `last_token_id in stop_token_ids` -> FINISHED_STOPPED, stop_reason = the id;
  // detokenizer.py update(): the stop token is appended to token_ids, left out of the text
  it("stops on a requested stop id, kept in token_ids, with stop_reason the id", async () => {
    vllm.script({ tokens: [5, 6, 200012, 7, 8] });
    const evs = await events(body());
    expect(idsOf(evs)).toEqual([5, 6, 200012]);
    expect(lastChoice(evs)).toMatchObject({ finish_reason: "stop", stop_reason: 200012 });
    expect(
      chunksOf(evs)
        .map((c) => c.choices[0].text)
        .join(""),
    ).toBe("[5][6]");
  });

  // sampling_params.py update_from_generation_config: generation-config EOS ids other than the tokenizer's join stop_token_ids
  // (gpt-oss generation_config.json eos_token_id [200002, 199999, 200012])
  it("stops on <|endoftext|> though the request did not ask for it", async () => {
    vllm.script({ tokens: [5, 199999, 7] });
    const evs = await events(body());
    expect(idsOf(evs)).toEqual([5, 199999]);
    expect(lastChoice(evs)).toMatchObject({ finish_reason: "stop", stop_reason: 199999 });
  });

  // sched/utils.py check_stop: `last_token_id == sampling_params.eos_token_id` is checked first and sets no stop_reason
  it("stops on the tokenizer EOS (<|return|>) with stop_reason null, even when it is also a requested stop id", async () => {
    vllm.script({ tokens: [5, 200002, 7] });
    const evs = await events(body());
    expect(idsOf(evs)).toEqual([5, 200002]);
    expect(lastChoice(evs)).toMatchObject({ finish_reason: "stop", stop_reason: null });
  });

  // sampling_params.py update_from_generation_config: with ignore_eos the generation-config ids are not added
  it("does not stop on EOS ids with ignore_eos", async () => {
    vllm.script({ tokens: [5, 199999, 200002, 7] });
    const evs = await events(body({ ignore_eos: true, stop_token_ids: [], max_tokens: 4 }));
    expect(idsOf(evs)).toEqual([5, 199999, 200002, 7]);
    expect(lastChoice(evs).finish_reason).toBe("length");
  });
});

describe("chunks", () => {
  // completion/serving.py completion_stream_generator: prompt_token_ids_to_return only while !has_echoed[i] and return_token_ids
  it("carries prompt_token_ids on the first chunk only, and token_ids on every chunk", async () => {
    vllm.script({ tokens: [5, 6, 7, 200002] });
    const cs = chunksOf(await events(body()));
    expect(cs[0]!.choices[0].prompt_token_ids).toEqual(PROMPT);
    expect(cs.slice(1).every((c) => c.choices[0].prompt_token_ids === null)).toBe(true);
    expect(cs.every((c) => Array.isArray(c.choices[0].token_ids))).toBe(true);
    // exclude_unset=True: no usage key on choice chunks; the choice's keys in model order
    expect("usage" in cs[0]!).toBe(false);
    expect(Object.keys(cs[0]!.choices[0])).toEqual([
      "index",
      "text",
      "logprobs",
      "finish_reason",
      "stop_reason",
      "prompt_token_ids",
      "token_ids",
    ]);
  });

  // completion/serving.py: token_ids=as_list(output.token_ids) if request.return_token_ids else None
  it("sends token_ids null without return_token_ids", async () => {
    vllm.script({ tokens: [5, 200002] });
    const cs = chunksOf(await events(body({ return_token_ids: undefined })));
    expect(cs.every((c) => c.choices[0].token_ids === null && c.choices[0].prompt_token_ids === null)).toBe(true);
  });

  // v1/engine/output_processor.py make_request_output: the first token alone, then every stream_interval tokens, the rest with the finish
  it("batches ids by stream interval", async () => {
    vllm.script({ tokens: [...plain(10), 200002] });
    const cs = chunksOf(await events(body({ stream_interval: 4 })));
    expect(cs.map((c) => c.choices[0].token_ids.length)).toEqual([1, 4, 4, 2]);
    expect(cs.at(-1)!.choices[0].finish_reason).toBe("stop");
  });

  // completion/serving.py: one choice per chunk, i = output.index + prompt_idx * num_choices, has_echoed per choice
  it("interleaves n=2 choices, each with its own first chunk's prompt ids", async () => {
    vllm.script({
      tokens: [
        [5, 6, 7, 200002],
        [8, 9, 200012],
      ],
    });
    const evs = await events(body({ n: 2 }));
    const cs = chunksOf(evs);
    expect(cs.map((c) => c.choices[0].index)).toEqual([0, 1, 0, 1, 0, 1, 0]);
    expect(cs.filter((c) => c.choices[0].prompt_token_ids !== null).map((c) => c.choices[0].index)).toEqual([0, 1]);
    expect(idsOf(evs, 0)).toEqual([5, 6, 7, 200002]);
    expect(idsOf(evs, 1)).toEqual([8, 9, 200012]);
    expect(lastChoice(evs, 1)).toMatchObject({ finish_reason: "stop", stop_reason: 200012 });
  });
});

describe("usage and [DONE]", () => {
  // completion/serving.py: final_usage_chunk (choices [], usage, exclude_none) when include_usage, then `data: [DONE]`
  it("ends with a usage chunk, then [DONE]", async () => {
    vllm.script({
      tokens: [
        [5, 6, 200002],
        [7, 200012],
      ],
    });
    const evs = await events(body({ n: 2 }));
    expect(evs.at(-1)).toBe("[DONE]");
    const usage = evs.at(-2) as Obj;
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toEqual({ prompt_tokens: PROMPT.length, total_tokens: PROMPT.length + 5, completion_tokens: 5 });
  });

  // serve/utils/api_utils.py should_include_usage: no stream_options -> no usage chunk
  it("sends no usage chunk without stream_options", async () => {
    vllm.script({ tokens: [5, 200002] });
    const evs = await events(body({ stream_options: undefined }));
    expect(evs.filter((e) => typeof e === "object" && (e as Obj).usage)).toEqual([]);
    expect(evs.at(-1)).toBe("[DONE]");
  });
});

describe("finish reasons other than stop and length", () => {
  // v1/engine/__init__.py FINISH_REASON_STRINGS "error"; serving base _raise_if_error -> GenerationError("Internal server error");
  // completion/serving.py `except GenerationError` -> data: {"error": …}, then `yield "data: [DONE]"`
  it("turns an engine error into an error frame, then [DONE]", async () => {
    vllm.script({ tokens: plain(8), errorAfter: 2 });
    const evs = await events(body());
    expect(idsOf(evs)).toEqual([1, 2]);
    expect(evs.slice(-2)).toEqual([
      { error: { message: "Internal server error", type: "InternalServerError", param: null, code: 500 } },
      "[DONE]",
    ]);
  });

  // v1/engine/output_processor.py abort_requests: a last output with no new ids and FinishReason.ABORT, passed through by completion/serving.py
  it("passes an engine abort as finish_reason abort (current)", async () => {
    vllm.script({ tokens: plain(8), abortAfter: 3 });
    const evs = await events(body());
    expect(idsOf(evs)).toEqual([1, 2, 3]);
    expect(lastChoice(evs)).toMatchObject({ finish_reason: "abort", stop_reason: null, token_ids: [] });
  });

  // serving_completion.py @00463e62: `if finish_reason == "abort": raise ValueError(output.stop_reason)` -> error frame
  it("turns an abort into an error frame on v0.10.2", async () => {
    vllm.set({ profile: "v0.10.2" });
    vllm.script({ tokens: plain(8), abortAfter: 3 });
    const evs = await events(body());
    expect(evs.slice(-2)).toEqual([{ error: { message: "None", type: "BadRequestError", param: null, code: 400 } }, "[DONE]"]);
  });

  // sched/utils.py check_stop / check_sequence_repetition -> FINISHED_REPETITION, stop_reason "repetition_detected"
  it("ends a repeating output as repetition", async () => {
    vllm.script({ tokens: [1, 2, 3, 1, 2, 3, 1, 2, 3, 4, 5] });
    const evs = await events(body({ repetition_detection: { min_pattern_size: 1, max_pattern_size: 4, min_count: 3 } }));
    expect(idsOf(evs)).toEqual([1, 2, 3, 1, 2, 3, 1, 2, 3]);
    expect(lastChoice(evs)).toMatchObject({ finish_reason: "repetition", stop_reason: "repetition_detected" });
  });

  // completion/serving.py `except Exception` -> create_streaming_error_response(e), then [DONE]
  it("sends a mid-stream error frame followed by [DONE]", async () => {
    vllm.script({ tokens: plain(8), midStreamError: { afterChunks: 2, message: "boom" } });
    const evs = await events(body());
    expect(chunksOf(evs)).toHaveLength(2);
    expect(evs.slice(-2)).toEqual([{ error: { message: "boom", type: "InternalServerError", param: null, code: 500 } }, "[DONE]"]);
  });
});

describe("a vLLM before return_token_ids (PR #22587)", () => {
  // engine/protocol.py OpenAIBaseModel extra="allow": unknown fields ignored (a warning in the log); the stream choice has text only
  it("answers 200 with text and no token ids", async () => {
    vllm.set({ profile: "v0.10.0" });
    vllm.script({ tokens: [5, 6, 200002] });
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

describe("the other endpoints", () => {
  // serve/instrumentator/health.py: Response(status_code=200) (empty); 503 on EngineDeadError
  it("GET /health: 200 with an empty body, 503 when the engine is dead", async () => {
    const ok = await fetch(`${vllm.url}/health`);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe("");
    vllm.set({ healthy: false });
    expect((await fetch(`${vllm.url}/health`)).status).toBe(503);
  });

  // v1/metrics/loggers.py PrometheusStatLogger: gauges vllm:num_requests_running / _waiting, labels model_name and engine
  it("GET /metrics: vllm: metrics in Prometheus text format", async () => {
    const res = await fetch(`${vllm.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toContain("# TYPE vllm:num_requests_running gauge");
    expect(text).toMatch(/^vllm:num_requests_running\{engine="0",model_name="openai\/gpt-oss-20b"\} \d+\.0$/m);
    expect(text).toMatch(/^vllm:num_requests_waiting\{/m);
  });

  // engine/protocol.py ModelCard: max_model_len; ModelList object "list"
  it("GET /v1/models: max_model_len", async () => {
    const j = (await (await fetch(`${vllm.url}/v1/models`)).json()) as Obj;
    expect(j.object).toBe("list");
    expect(j.data[0]).toMatchObject({ id: "openai/gpt-oss-20b", object: "model", owned_by: "vllm", max_model_len: 1000 });
  });

  // TokenizeResponse {count, max_model_len, tokens, token_strs}
  it("POST /tokenize", async () => {
    const j = (await (await post({ prompt: "hi" }, "/tokenize")).json()) as Obj;
    expect(j).toMatchObject({ count: 2, max_model_len: 1000, tokens: [104, 105] });
  });

  // completion/serving.py request_output_to_completion_response
  it("POST /v1/completions without stream", async () => {
    vllm.script({ tokens: [5, 6, 200012] });
    const res = await post(body({ stream: false, stream_options: undefined }));
    const j = (await res.json()) as Obj;
    expect(j.choices[0]).toMatchObject({
      index: 0,
      text: "[5][6]",
      finish_reason: "stop",
      stop_reason: 200012,
      token_ids: [5, 6, 200012],
      prompt_token_ids: PROMPT,
    });
    expect(j.usage).toMatchObject({ prompt_tokens: PROMPT.length, completion_tokens: 3, total_tokens: PROMPT.length + 3 });
  });

  it("records every request: path, headers, body", async () => {
    vllm.script({ tokens: [5, 200002] });
    await events(body({ max_tokens: 7 }));
    const last = vllm.completions().at(-1)!;
    expect(last.path).toBe("/v1/completions");
    expect(last.headers["content-type"]).toBe("application/json");
    expect(last.body).toMatchObject({ max_tokens: 7, return_token_ids: true });
    expect(last.events.at(-1)).toBe("[DONE]");
    expect((await fetch(`${vllm.url}/nope`)).status).toBe(404);
    expect(vllm.received.at(-1)!.path).toBe("/nope");
  });
});
