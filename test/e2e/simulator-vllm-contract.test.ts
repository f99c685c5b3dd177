/**
 * The engine simulator (src/simulate/, `harmony-sidecar simulate-engine`)
 * against vLLM's contract, as test/e2e/stand-in-vllm-contract.test.ts pins
 * it for the faithful stand-in: the same cases, for the current wire (the
 * stand-in's profile `current`), each naming the vLLM file it mirrors
 * (repository vllm-project/vllm, at the commits test/e2e/stand-ins/vllm.ts
 * cites). The simulator decodes with the real vocabulary, so texts are
 * gpt-oss's, not the stand-in's placeholders. Then what only the simulator
 * does: tools read from the prompt, generated calls valid for their schemas,
 * injections reported by key. Plain `fetch` to 127.0.0.1.
 */
import { Ajv } from "ajv";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { renderConversationForCompletion } from "../../src/core/render.js";
import { ENGINE_FAULT_KINDS, REAL_FAULT_KINDS } from "../../src/loadtest/generate.js";
import { startSimulator, type Simulator } from "../../src/simulate/server.js";
import { harmony, type Json } from "../helpers.js";

type Obj = Record<string, Json>;

const { enc, vocab } = harmony();
let sim: Simulator;

beforeAll(async () => {
  sim = await startSimulator({ port: 0, maxModelLen: 1000, tokensPerSecond: 0, faultRate: 0.5, seed: 3 }, enc, vocab);
});
afterAll(async () => {
  await sim.close();
});
beforeEach(() => {
  sim.script({});
});

/** Ordinary ids (no stop, no EOS). */
const plain = (k: number, from = 1000) => Array.from({ length: k }, (_, i) => from + i);
const PROMPT = enc.encode("<|start|>user<|message|>hi<|end|><|start|>assistant");
const text = (ids: number[]) =>
  ids.map((id) => new TextDecoder().decode(vocab.bytes.subarray(vocab.byteStart(id), vocab.byteEnd(id)))).join("");

/** The sidecar's own body (src/upstream/vllm.ts completionBody), with overrides. */
function body(over: Obj = {}): Obj {
  return {
    model: "openai/gpt-oss-20b",
    prompt: PROMPT,
    stream: true,
    stream_options: { include_usage: true },
    return_token_ids: true,
    skip_special_tokens: false,
    stop_token_ids: [200002, 200012, 199999],
    n: 1,
    ...over,
  };
}

async function post(b: Obj, path = "/v1/completions"): Promise<Response> {
  return fetch(`${sim.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(b) });
}

async function events(b: Obj): Promise<unknown[]> {
  const res = await post(b);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const t = await res.text();
  return t
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
    sim.script({ tokens: plain(40) });
    const evs = await events(body());
    expect(idsOf(evs)).toEqual(plain(16));
    expect(lastChoice(evs)).toMatchObject({ finish_reason: "length", stop_reason: null });
  });

  // completion/protocol.py normalize_null_max_tokens
  it("turns an explicit null into 16", async () => {
    sim.script({ tokens: plain(40) });
    expect(idsOf(await events(body({ max_tokens: null })))).toHaveLength(16);
  });

  // serve/utils/api_utils.py get_max_tokens; check_stop: num_tokens >= max_model_len -> LENGTH
  it("is capped by what is left of the context", async () => {
    sim.script({ tokens: plain(40) });
    const evs = await events(body({ prompt: plain(990, 10), max_tokens: 10 }));
    expect(idsOf(evs)).toHaveLength(10);
    expect(lastChoice(evs).finish_reason).toBe("length");
  });
});

describe("the context-length 400", () => {
  // renderers/params.py TokenizeParams._token_len_check, exceptions.py VLLMValidationError.__str__
  it("answers prompt + max_tokens beyond max_model_len with vLLM's body", async () => {
    const res = await post(body({ prompt: plain(990, 10) }));
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

  // renderers/params.py TokenizeParams.__post_init__
  it("refuses max_tokens beyond max_model_len", async () => {
    const res = await post(body({ max_tokens: 5000 }));
    expect(res.status).toBe(400);
    const j = (await res.json()) as Obj;
    expect(j.error.param).toBe("max_tokens");
    expect(j.error.message).toContain("cannot be greater than max_model_len");
  });

  // the served-model check: 404 "The model `X` does not exist."
  it("answers another model name with a 404", async () => {
    const res = await post(body({ model: "gpt-4" }));
    expect(res.status).toBe(404);
    expect(((await res.json()) as Obj).error.message).toBe("The model `gpt-4` does not exist.");
  });
});

describe("stop ids and EOS ids", () => {
  // sched/utils.py check_stop: a stop id -> stop, stop_reason = the id; detokenizer.py: kept in token_ids, left out of the text
  it("stops on a requested stop id, kept in token_ids, with stop_reason the id", async () => {
    sim.script({ tokens: [5000, 6000, 200012, 7, 8] });
    const evs = await events(body());
    expect(idsOf(evs)).toEqual([5000, 6000, 200012]);
    expect(lastChoice(evs)).toMatchObject({ finish_reason: "stop", stop_reason: 200012 });
    expect(
      chunksOf(evs)
        .map((c) => c.choices[0].text)
        .join(""),
    ).toBe(text([5000, 6000]));
  });

  // sampling_params.py update_from_generation_config (gpt-oss eos_token_id [200002, 199999, 200012])
  it("stops on <|endoftext|> though the request did not ask for it", async () => {
    sim.script({ tokens: [5000, 199999, 7] });
    const evs = await events(body({ stop_token_ids: [] }));
    expect(idsOf(evs)).toEqual([5000, 199999]);
    expect(lastChoice(evs)).toMatchObject({ finish_reason: "stop", stop_reason: 199999 });
  });

  // sched/utils.py check_stop: the tokenizer EOS is checked first and sets no stop_reason
  it("stops on the tokenizer EOS (<|return|>) with stop_reason null, even when it is also a requested stop id", async () => {
    sim.script({ tokens: [5000, 200002, 7] });
    const evs = await events(body());
    expect(idsOf(evs)).toEqual([5000, 200002]);
    expect(lastChoice(evs)).toMatchObject({ finish_reason: "stop", stop_reason: null });
  });

  // sampling_params.py update_from_generation_config: with ignore_eos the generation-config ids are not added
  it("does not stop on EOS ids with ignore_eos", async () => {
    sim.script({ tokens: [5000, 199999, 200002, 7] });
    const evs = await events(body({ ignore_eos: true, stop_token_ids: [], max_tokens: 4 }));
    expect(idsOf(evs)).toEqual([5000, 199999, 200002, 7]);
    expect(lastChoice(evs).finish_reason).toBe("length");
  });

  // skip_special_tokens (default true): specials dropped from text; false: by name
  it("writes specials by name only with skip_special_tokens false", async () => {
    sim.script({ tokens: enc.encode("<|channel|>final<|message|>Hi<|return|>") });
    const named = chunksOf(await events(body()))
      .map((c) => c.choices[0].text)
      .join("");
    expect(named).toBe("<|channel|>final<|message|>Hi");
    const skipped = chunksOf(await events(body({ skip_special_tokens: undefined })))
      .map((c) => c.choices[0].text)
      .join("");
    expect(skipped).toBe("finalHi");
  });
});

describe("chunks", () => {
  // completion/serving.py completion_stream_generator: prompt_token_ids on each choice's first chunk only; no usage key (exclude_unset)
  it("carries prompt_token_ids on the first chunk only, and token_ids on every chunk", async () => {
    sim.script({ tokens: [5000, 6000, 7000, 200002] });
    const cs = chunksOf(await events(body()));
    expect(cs[0]!.choices[0].prompt_token_ids).toEqual(PROMPT);
    expect(cs.slice(1).every((c) => c.choices[0].prompt_token_ids === null)).toBe(true);
    expect(cs.every((c) => Array.isArray(c.choices[0].token_ids))).toBe(true);
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
    expect(cs[0]).toMatchObject({ object: "text_completion", model: "openai/gpt-oss-20b" });
    expect(cs[0]!.id).toMatch(/^cmpl-/);
  });

  // completion/serving.py: token_ids=as_list(output.token_ids) if request.return_token_ids else None
  it("sends token_ids null without return_token_ids", async () => {
    sim.script({ tokens: [5000, 200002] });
    const cs = chunksOf(await events(body({ return_token_ids: undefined })));
    expect(cs.every((c) => c.choices[0].token_ids === null && c.choices[0].prompt_token_ids === null)).toBe(true);
  });

  // v1/engine/output_processor.py make_request_output: the first token alone, then every stream_interval tokens, the rest with the finish
  it("batches ids by stream interval", async () => {
    sim.script({ tokens: [...plain(10), 200002] });
    const cs = chunksOf(await events(body({ stream_interval: 4 })));
    expect(cs.map((c) => c.choices[0].token_ids.length)).toEqual([1, 4, 4, 2]);
    expect(cs.at(-1)!.choices[0].finish_reason).toBe("stop");
  });

  // completion/serving.py: one choice per chunk, i = output.index + prompt_idx * num_choices
  it("interleaves n=2 choices, each with its own first chunk's prompt ids", async () => {
    sim.script({
      tokens: [
        [5000, 6000, 7000, 200002],
        [8000, 9000, 200012],
      ],
    });
    const evs = await events(body({ n: 2 }));
    const cs = chunksOf(evs);
    expect(cs.map((c) => c.choices[0].index)).toEqual([0, 1, 0, 1, 0, 1, 0]);
    expect(cs.filter((c) => c.choices[0].prompt_token_ids !== null).map((c) => c.choices[0].index)).toEqual([0, 1]);
    expect(idsOf(evs, 0)).toEqual([5000, 6000, 7000, 200002]);
    expect(idsOf(evs, 1)).toEqual([8000, 9000, 200012]);
    expect(lastChoice(evs, 1)).toMatchObject({ finish_reason: "stop", stop_reason: 200012 });
  });

  // sampling_params.py _verify_args: n must be 1 when greedy
  it("refuses n > 1 with temperature 0", async () => {
    const res = await post(body({ n: 2, temperature: 0 }));
    expect(res.status).toBe(400);
    expect(((await res.json()) as Obj).error.message).toBe("n must be 1 when using greedy sampling, got 2.");
  });
});

describe("usage and [DONE]", () => {
  // completion/serving.py: final_usage_chunk (choices [], usage) when include_usage, then `data: [DONE]`
  it("ends with a usage chunk, then [DONE]", async () => {
    sim.script({
      tokens: [
        [5000, 6000, 200002],
        [7000, 200012],
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
    sim.script({ tokens: [5000, 200002] });
    const evs = await events(body({ stream_options: undefined }));
    expect(evs.filter((e) => typeof e === "object" && (e as Obj).usage)).toEqual([]);
    expect(evs.at(-1)).toBe("[DONE]");
  });

  // completion/protocol.py validate_stream_options
  it("refuses stream_options without stream", async () => {
    const res = await post(body({ stream: false }));
    expect(res.status).toBe(400);
    expect(((await res.json()) as Obj).error.param).toBe("stream_options");
  });
});

describe("finish reasons other than stop and length", () => {
  // v1/engine/output_processor.py abort_requests: a last output with no new ids and FinishReason.ABORT
  it("passes an engine abort as finish_reason abort", async () => {
    sim.script({ tokens: plain(3), then: "abort" });
    const evs = await events(body());
    expect(idsOf(evs)).toEqual(plain(3));
    expect(lastChoice(evs)).toMatchObject({ finish_reason: "abort", stop_reason: null, token_ids: [] });
  });

  // sched/utils.py check_sequence_repetition -> FINISHED_REPETITION, stop_reason "repetition_detected"
  it("ends a repeating output as repetition", async () => {
    sim.script({ tokens: [1, 2, 3, 1, 2, 3, 1, 2, 3, 4, 5] });
    const evs = await events(body({ repetition_detection: { min_pattern_size: 1, max_pattern_size: 4, min_count: 3 } }));
    expect(idsOf(evs)).toEqual([1, 2, 3, 1, 2, 3, 1, 2, 3]);
    expect(lastChoice(evs)).toMatchObject({ finish_reason: "repetition", stop_reason: "repetition_detected" });
  });
});

describe("the other endpoints", () => {
  // serve/instrumentator/health.py: Response(status_code=200) (empty)
  it("GET /health: 200 with an empty body", async () => {
    const ok = await fetch(`${sim.url}/health`);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe("");
  });

  // v1/metrics/loggers.py PrometheusStatLogger: vllm:num_requests_running / _waiting, labels model_name and engine
  it("GET /metrics: vllm: metrics in Prometheus text format", async () => {
    const res = await fetch(`${sim.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    const t = await res.text();
    expect(t).toContain("# TYPE vllm:num_requests_running gauge");
    expect(t).toMatch(/^vllm:num_requests_running\{engine="0",model_name="openai\/gpt-oss-20b"\} \d+(\.0)?$/m);
    expect(t).toMatch(/^vllm:num_requests_waiting\{/m);
    expect(t).toMatch(/^vllm:generation_tokens_total\{/m);
  });

  // engine/protocol.py ModelCard: max_model_len; ModelList object "list"
  it("GET /v1/models: max_model_len", async () => {
    const j = (await (await fetch(`${sim.url}/v1/models`)).json()) as Obj;
    expect(j.object).toBe("list");
    expect(j.data[0]).toMatchObject({ id: "openai/gpt-oss-20b", object: "model", owned_by: "vllm", max_model_len: 1000 });
  });

  // TokenizeResponse {count, max_model_len, tokens, token_strs}, with the real tokenizer
  it("POST /tokenize and /detokenize", async () => {
    const j = (await (await post({ prompt: "hello world" }, "/tokenize")).json()) as Obj;
    expect(j).toMatchObject({ count: 2, max_model_len: 1000, tokens: enc.encodeOrdinary("hello world") });
    const d = (await (await post({ tokens: j.tokens }, "/detokenize")).json()) as Obj;
    expect(d.prompt).toBe("hello world");
  });

  // completion/serving.py request_output_to_completion_response
  it("POST /v1/completions without stream", async () => {
    sim.script({ tokens: [5000, 6000, 200012] });
    const res = await post(body({ stream: false, stream_options: undefined }));
    const j = (await res.json()) as Obj;
    expect(j.choices[0]).toMatchObject({
      index: 0,
      text: text([5000, 6000]),
      finish_reason: "stop",
      stop_reason: 200012,
      token_ids: [5000, 6000, 200012],
      prompt_token_ids: PROMPT,
    });
    expect(j.usage).toMatchObject({ prompt_tokens: PROMPT.length, completion_tokens: 3, total_tokens: PROMPT.length + 3 });
    expect(res.headers.get("x-simulator-request-id")).toBe(j.id);
  });

  it("answers unknown paths 404 and wrong methods 405, as FastAPI does", async () => {
    expect((await fetch(`${sim.url}/nope`)).status).toBe(404);
    expect((await fetch(`${sim.url}/v1/completions`)).status).toBe(405);
  });
});

describe("generations (what only the simulator does)", () => {
  const TOOLS = [
    {
      name: "get_weather",
      description: "Get the weather.",
      parameters: {
        type: "object",
        properties: { location: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] }, days: { type: "integer" } },
        required: ["location"],
        additionalProperties: false,
      },
    },
    {
      name: "book_flight",
      description: "Book a flight.",
      parameters: {
        type: "object",
        properties: {
          origin: { type: "string" },
          passengers: { type: "object", properties: { adults: { type: "integer" } }, required: ["adults"] },
          tags: { type: "array", items: { type: "string" } },
        },
        required: ["origin", "passengers"],
      },
    },
  ];
  /** A prompt as the sidecar renders it: the tools in the developer message's namespace functions block. */
  const prompt = (key: string) =>
    enc.encode(
      renderConversationForCompletion([
        { role: "system", content: { type: "system_content", model_identity: "You are ChatGPT.", reasoning_effort: "medium" } },
        { role: "developer", content: { type: "developer_content", tools: { functions: { name: "functions", tools: TOOLS } } } },
        { role: "user", content: `Weather? (harmony-loadtest run=contract request=${key})` },
      ]),
    );

  it("calls only the tools the prompt declares, with arguments valid for their schemas, and reports it by key", async () => {
    sim.script();
    const ajv = new Ajv({ strict: false });
    const validators = new Map(TOOLS.map((t) => [t.name, ajv.compile(t.parameters)]));
    let calls = 0;
    for (let i = 0; i < 40; i++) {
      const res = await post(body({ prompt: prompt(String(i)), stream: false, stream_options: undefined, max_tokens: 600 }));
      expect(res.status).toBe(200);
      const j = (await res.json()) as Obj;
      const rec = (await (await fetch(`${sim.url}/simulate/requests?key=${encodeURIComponent(`contract/${i}`)}`)).json()) as Obj;
      expect(rec).toMatchObject({ id: j.id, key: `contract/${i}`, endpoint: "completions", tools: ["get_weather", "book_flight"] });
      const c = rec.choices[0];
      expect(c.tokens).toBe(j.choices[0].token_ids.length);
      for (const call of c.intent.calls as { name: string; arguments: string }[]) {
        calls++;
        const v = validators.get(call.name);
        expect(v, call.name).toBeDefined();
        expect(v!(JSON.parse(call.arguments)), `${call.name} ${call.arguments}`).toBe(true);
      }
    }
    expect(calls).toBeGreaterThan(10);
    // a key samples the same generation every time
    const first = (await (await fetch(`${sim.url}/simulate/requests?key=contract/7`)).json()) as Obj;
    const again = (await (
      await post(body({ prompt: prompt("7"), stream: false, stream_options: undefined, max_tokens: 600 }))
    ).json()) as Obj;
    const second = (await (await fetch(`${sim.url}/simulate/requests?key=contract/7`)).json()) as Obj;
    expect(second.id).toBe(again.id);
    expect(second.id).not.toBe(first.id);
    expect(second.choices).toEqual(first.choices);
    const run = (await (await fetch(`${sim.url}/simulate/requests?run=contract`)).json()) as Obj;
    expect(run.data).toHaveLength(40);
  });

  it("answers without calling when the prompt declares no tools", async () => {
    sim.script();
    for (let i = 0; i < 10; i++) {
      await (
        await post(
          body({
            prompt: enc.encode(`<|start|>user<|message|>(harmony-loadtest run=notools request=${i})<|end|><|start|>assistant`),
            max_tokens: 600,
          }),
        )
      ).text();
    }
    const run = (await (await fetch(`${sim.url}/simulate/requests?run=notools`)).json()) as Obj;
    expect(run.data).toHaveLength(10);
    for (const r of run.data as Obj[]) expect(r.choices[0].intent.calls).toEqual([]);
  });

  it("serves Chat and Responses raw: the same generation as text, control tokens included, no parsed calls", async () => {
    sim.script();
    const key = "(harmony-loadtest run=raw request=1)";
    const tools = [{ type: "function", function: TOOLS[0] }];
    const chat = (await (
      await post({ model: "openai/gpt-oss-20b", messages: [{ role: "user", content: `Weather? ${key}` }], tools }, "/v1/chat/completions")
    ).json()) as Obj;
    expect(chat.object).toBe("chat.completion");
    const content: string = chat.choices[0].message.content;
    expect(content.startsWith("<|channel|>")).toBe(true); // the prompt ended in <|start|>assistant
    expect(chat.choices[0].message.tool_calls).toEqual([]);
    const rec = (await (await fetch(`${sim.url}/simulate/requests?id=${chat.id}`)).json()) as Obj;
    expect(rec).toMatchObject({ key: "raw/1", endpoint: "chat", tools: ["get_weather"] });
    const res = await post(
      {
        model: "openai/gpt-oss-20b",
        input: `Weather? ${key.replace("request=1", "request=2")}`,
        tools: [{ type: "function", ...TOOLS[0] }],
        stream: true,
      },
      "/v1/responses",
    );
    const types = (await res.text())
      .split("\n\n")
      .filter((b) => b.startsWith("event: "))
      .map((b) => b.slice(7, b.indexOf("\n")));
    expect(types[0]).toBe("response.created");
    expect(types).toContain("response.output_text.delta");
    expect(["response.completed", "response.incomplete"]).toContain(types.at(-1));
  });

  it("offers every real-world shape by default, but no id outside the vocabulary", () => {
    expect(ENGINE_FAULT_KINDS).toEqual(expect.arrayContaining([...REAL_FAULT_KINDS]));
    expect(ENGINE_FAULT_KINDS).not.toContain("out_of_vocab_token_in_content");
    expect(ENGINE_FAULT_KINDS).not.toContain("invalid_id_between_messages");
  });
});
