/**
 * vLLM's `POST /v1/completions` contract (and the endpoints beside it) for
 * the current wire, as one suite run against every engine that claims it:
 * the faithful stand-in (test/e2e/stand-in-vllm-contract.test.ts) and the
 * simulator (test/e2e/simulator-vllm-contract.test.ts). Each case names the
 * vLLM file it mirrors (repository vllm-project/vllm, at the commits
 * test/e2e/stand-ins/vllm.ts cites). An engine's own cases (older profiles,
 * scripted faults, what only the simulator does) stay in its file, with the
 * helpers exported here. Plain `fetch` to 127.0.0.1.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Json } from "../helpers.js";

export type Obj = Record<string, Json>;

/** What the suite needs of an engine: where it listens, what its model samples next, how it stops. */
export interface ContractEngine {
  url: string;
  /** The ids the model samples for the next requests: one list for every choice, or one per choice. */
  script(s: { tokens?: number[] | number[][] }): void;
  close(): Promise<void>;
}

export interface ContractTarget<E extends ContractEngine> {
  /** Starts the engine with `--max-model-len 1000`, on 127.0.0.1 port 0. */
  start(): Promise<E>;
  /** Before each case: the engine as started. */
  reset(engine: E): void;
  /** The prompt the suite's requests send, as the sidecar renders it. */
  prompt: number[];
  /** The completion text of ordinary ids, as the engine's detokenizer writes it. */
  text(ids: number[]): string;
  /** The ids of `/tokenize`'s answer for a text. */
  tokenize(text: string): number[];
  /** Scripts the model to sample `ids`, then the engine to abort the request. */
  abort(engine: E, ids: number[]): void;
}

export interface Contract<E extends ContractEngine> {
  /** The engine the suite started (set before the first case). */
  engine(): E;
  post(b: Obj, path?: string): Promise<Response>;
  /** The SSE `data:` payloads of a stream ("[DONE]" kept as the string). */
  events(b: Obj): Promise<unknown[]>;
  /** The sidecar's own body (src/upstream/vllm.ts completionBody), with overrides. */
  body(over?: Obj): Obj;
}

/** `k` ordinary ids from `from` (no stop, no EOS). */
export const plain = (k: number, from = 1000): number[] => Array.from({ length: k }, (_, i) => from + i);

/** The chunks that carry a choice (not the usage chunk, not an error frame). */
export const chunksOf = (evs: unknown[]): Obj[] =>
  evs.filter((e): e is Obj => typeof e === "object" && e !== null && Array.isArray((e as Obj).choices) && (e as Obj).choices.length > 0);
export const idsOf = (evs: unknown[], choice = 0): number[] =>
  chunksOf(evs).flatMap((c) => (c.choices[0].index === choice ? (c.choices[0].token_ids as number[]) : []));
export const lastChoice = (evs: unknown[], choice = 0): Obj =>
  chunksOf(evs)
    .filter((c) => c.choices[0].index === choice)
    .at(-1)!.choices[0];

/** Starts the engine for the file, and declares the contract's cases; returns the helpers for the engine's own. */
export function vllmContract<E extends ContractEngine>(target: ContractTarget<E>): Contract<E> {
  let engine: E;
  beforeAll(async () => {
    engine = await target.start();
  });
  afterAll(async () => {
    await engine.close();
  });
  beforeEach(() => {
    target.reset(engine);
  });

  const PROMPT = target.prompt;
  const c: Contract<E> = {
    engine: () => engine,
    post: (b, path = "/v1/completions") =>
      fetch(`${engine.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(b) }),
    async events(b) {
      const res = await c.post(b);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
      const text = await res.text();
      return text
        .split("\n\n")
        .filter((block) => block.startsWith("data: "))
        .map((block) => block.slice(6))
        .map((d) => (d === "[DONE]" ? d : (JSON.parse(d) as unknown)));
    },
    body: (over = {}) => ({
      model: "openai/gpt-oss-20b",
      prompt: PROMPT,
      stream: true,
      stream_options: { include_usage: true },
      return_token_ids: true,
      skip_special_tokens: false,
      stop_token_ids: [200002, 200012, 199999],
      n: 1,
      ...over,
    }),
  };
  const { post, events, body } = c;
  const script = (tokens: number[] | number[][]) => engine.script({ tokens });

  describe("max_tokens", () => {
    // completion/protocol.py: `max_tokens: int | None = 16`; sched/utils.py check_stop: output >= max_tokens -> LENGTH
    it("defaults to 16 when absent", async () => {
      script(plain(40));
      const evs = await events(body());
      expect(idsOf(evs)).toEqual(plain(16));
      expect(lastChoice(evs)).toMatchObject({ finish_reason: "length", stop_reason: null });
    });

    // completion/protocol.py normalize_null_max_tokens: an explicit null becomes the field default (16)
    it("turns an explicit null into 16", async () => {
      script(plain(40));
      expect(idsOf(await events(body({ max_tokens: null })))).toHaveLength(16);
    });

    // serve/utils/api_utils.py get_max_tokens: min(max_model_len - prompt, max_tokens, ...); check_stop: num_tokens >= max_model_len -> LENGTH
    it("is capped by what is left of the context", async () => {
      script(plain(40));
      const evs = await events(body({ prompt: plain(990, 10), max_tokens: 10 }));
      expect(idsOf(evs)).toHaveLength(10);
      expect(lastChoice(evs).finish_reason).toBe("length");
    });
  });

  describe("the context-length 400", () => {
    // renderers/params.py TokenizeParams._token_len_check (max_input_tokens = max_model_len - (max_tokens or 0)),
    // exceptions.py VLLMValidationError.__str__, serve/utils/error_response.py create_error_response, engine/protocol.py ErrorResponse
    it("answers prompt + max_tokens beyond max_model_len with vLLM's body", async () => {
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

    // the served-model check: 404 "The model `X` does not exist."
    it("answers another model name with a 404", async () => {
      const res = await post(body({ model: "gpt-4" }));
      expect(res.status).toBe(404);
      expect(((await res.json()) as Obj).error.message).toBe("The model `gpt-4` does not exist.");
    });
  });

  describe("stop ids and EOS ids", () => {
    // sched/utils.py check_stop: `last_token_id in stop_token_ids` -> FINISHED_STOPPED, stop_reason = the id;
    // detokenizer.py update(): the stop token is appended to token_ids, left out of the text
    it("stops on a requested stop id, kept in token_ids, with stop_reason the id", async () => {
      script([5000, 6000, 200012, 7, 8]);
      const evs = await events(body());
      expect(idsOf(evs)).toEqual([5000, 6000, 200012]);
      expect(lastChoice(evs)).toMatchObject({ finish_reason: "stop", stop_reason: 200012 });
      expect(
        chunksOf(evs)
          .map((ch) => ch.choices[0].text)
          .join(""),
      ).toBe(target.text([5000, 6000]));
    });

    // sampling_params.py update_from_generation_config: generation-config EOS ids other than the tokenizer's join stop_token_ids
    // (gpt-oss generation_config.json eos_token_id [200002, 199999, 200012])
    it("stops on <|endoftext|> though the request did not ask for it", async () => {
      script([5000, 199999, 7]);
      const evs = await events(body({ stop_token_ids: [] }));
      expect(idsOf(evs)).toEqual([5000, 199999]);
      expect(lastChoice(evs)).toMatchObject({ finish_reason: "stop", stop_reason: 199999 });
    });

    // sched/utils.py check_stop: `last_token_id == sampling_params.eos_token_id` is checked first and sets no stop_reason
    it("stops on the tokenizer EOS (<|return|>) with stop_reason null, even when it is also a requested stop id", async () => {
      script([5000, 200002, 7]);
      const evs = await events(body());
      expect(idsOf(evs)).toEqual([5000, 200002]);
      expect(lastChoice(evs)).toMatchObject({ finish_reason: "stop", stop_reason: null });
    });

    // sampling_params.py update_from_generation_config: with ignore_eos the generation-config ids are not added
    it("does not stop on EOS ids with ignore_eos", async () => {
      script([5000, 199999, 200002, 7]);
      const evs = await events(body({ ignore_eos: true, stop_token_ids: [], max_tokens: 4 }));
      expect(idsOf(evs)).toEqual([5000, 199999, 200002, 7]);
      expect(lastChoice(evs).finish_reason).toBe("length");
    });
  });

  describe("chunks", () => {
    // completion/serving.py completion_stream_generator: prompt_token_ids_to_return only while !has_echoed[i] and return_token_ids
    it("carries prompt_token_ids on the first chunk only, and token_ids on every chunk", async () => {
      script([5000, 6000, 7000, 200002]);
      const cs = chunksOf(await events(body()));
      expect(cs[0]!.choices[0].prompt_token_ids).toEqual(PROMPT);
      expect(cs.slice(1).every((ch) => ch.choices[0].prompt_token_ids === null)).toBe(true);
      expect(cs.every((ch) => Array.isArray(ch.choices[0].token_ids))).toBe(true);
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
      expect(cs[0]).toMatchObject({ object: "text_completion", model: "openai/gpt-oss-20b" });
      expect(cs[0]!.id).toMatch(/^cmpl-/);
    });

    // completion/serving.py: token_ids=as_list(output.token_ids) if request.return_token_ids else None
    it("sends token_ids null without return_token_ids", async () => {
      script([5000, 200002]);
      const cs = chunksOf(await events(body({ return_token_ids: undefined })));
      expect(cs.every((ch) => ch.choices[0].token_ids === null && ch.choices[0].prompt_token_ids === null)).toBe(true);
    });

    // v1/engine/output_processor.py make_request_output: the first token alone, then every stream_interval tokens, the rest with the finish
    it("batches ids by stream interval", async () => {
      script([...plain(10), 200002]);
      const cs = chunksOf(await events(body({ stream_interval: 4 })));
      expect(cs.map((ch) => ch.choices[0].token_ids.length)).toEqual([1, 4, 4, 2]);
      expect(cs.at(-1)!.choices[0].finish_reason).toBe("stop");
    });

    // completion/serving.py: one choice per chunk, i = output.index + prompt_idx * num_choices, has_echoed per choice
    it("interleaves n=2 choices, each with its own first chunk's prompt ids", async () => {
      script([
        [5000, 6000, 7000, 200002],
        [8000, 9000, 200012],
      ]);
      const evs = await events(body({ n: 2 }));
      const cs = chunksOf(evs);
      expect(cs.map((ch) => ch.choices[0].index)).toEqual([0, 1, 0, 1, 0, 1, 0]);
      expect(cs.filter((ch) => ch.choices[0].prompt_token_ids !== null).map((ch) => ch.choices[0].index)).toEqual([0, 1]);
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
    // completion/serving.py: final_usage_chunk (choices [], usage, exclude_none) when include_usage, then `data: [DONE]`
    it("ends with a usage chunk, then [DONE]", async () => {
      script([
        [5000, 6000, 200002],
        [7000, 200012],
      ]);
      const evs = await events(body({ n: 2 }));
      expect(evs.at(-1)).toBe("[DONE]");
      const usage = evs.at(-2) as Obj;
      expect(usage.choices).toEqual([]);
      expect(usage.usage).toEqual({ prompt_tokens: PROMPT.length, total_tokens: PROMPT.length + 5, completion_tokens: 5 });
    });

    // serve/utils/api_utils.py should_include_usage: no stream_options -> no usage chunk
    it("sends no usage chunk without stream_options", async () => {
      script([5000, 200002]);
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
    // v1/engine/output_processor.py abort_requests: a last output with no new ids and FinishReason.ABORT, passed through by completion/serving.py
    it("passes an engine abort as finish_reason abort", async () => {
      target.abort(engine, plain(3));
      const evs = await events(body());
      expect(idsOf(evs)).toEqual(plain(3));
      expect(lastChoice(evs)).toMatchObject({ finish_reason: "abort", stop_reason: null, token_ids: [] });
    });

    // sched/utils.py check_stop / check_sequence_repetition -> FINISHED_REPETITION, stop_reason "repetition_detected"
    it("ends a repeating output as repetition", async () => {
      script([1, 2, 3, 1, 2, 3, 1, 2, 3, 4, 5]);
      const evs = await events(body({ repetition_detection: { min_pattern_size: 1, max_pattern_size: 4, min_count: 3 } }));
      expect(idsOf(evs)).toEqual([1, 2, 3, 1, 2, 3, 1, 2, 3]);
      expect(lastChoice(evs)).toMatchObject({ finish_reason: "repetition", stop_reason: "repetition_detected" });
    });
  });

  describe("the other endpoints", () => {
    // serve/instrumentator/health.py: Response(status_code=200) (empty)
    it("GET /health: 200 with an empty body", async () => {
      const ok = await fetch(`${engine.url}/health`);
      expect(ok.status).toBe(200);
      expect(await ok.text()).toBe("");
    });

    // v1/metrics/loggers.py PrometheusStatLogger: gauges vllm:num_requests_running / _waiting, labels model_name and engine
    it("GET /metrics: vllm: metrics in Prometheus text format", async () => {
      const res = await fetch(`${engine.url}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
      const text = await res.text();
      expect(text).toContain("# TYPE vllm:num_requests_running gauge");
      expect(text).toMatch(/^vllm:num_requests_running\{engine="0",model_name="openai\/gpt-oss-20b"\} \d+(\.0)?$/m);
      expect(text).toMatch(/^vllm:num_requests_waiting\{/m);
      expect(text).toMatch(/^vllm:generation_tokens_total\{/m);
    });

    // engine/protocol.py ModelCard: max_model_len; ModelList object "list"
    it("GET /v1/models: max_model_len", async () => {
      const j = (await (await fetch(`${engine.url}/v1/models`)).json()) as Obj;
      expect(j.object).toBe("list");
      expect(j.data[0]).toMatchObject({ id: "openai/gpt-oss-20b", object: "model", owned_by: "vllm", max_model_len: 1000 });
    });

    // TokenizeResponse {count, max_model_len, tokens, token_strs}
    it("POST /tokenize", async () => {
      const tokens = target.tokenize("hello world");
      const j = (await (await post({ prompt: "hello world" }, "/tokenize")).json()) as Obj;
      expect(j).toMatchObject({ count: tokens.length, max_model_len: 1000, tokens });
    });

    // completion/serving.py request_output_to_completion_response
    it("POST /v1/completions without stream", async () => {
      script([5000, 6000, 200012]);
      const res = await post(body({ stream: false, stream_options: undefined }));
      const j = (await res.json()) as Obj;
      expect(j.choices[0]).toMatchObject({
        index: 0,
        text: target.text([5000, 6000]),
        finish_reason: "stop",
        stop_reason: 200012,
        token_ids: [5000, 6000, 200012],
        prompt_token_ids: PROMPT,
      });
      expect(j.usage).toMatchObject({ prompt_tokens: PROMPT.length, completion_tokens: 3, total_tokens: PROMPT.length + 3 });
    });

    it("answers unknown paths 404 and wrong methods 405, as FastAPI does", async () => {
      expect((await fetch(`${engine.url}/nope`)).status).toBe(404);
      expect((await fetch(`${engine.url}/v1/completions`)).status).toBe(405);
    });
  });

  return c;
}
