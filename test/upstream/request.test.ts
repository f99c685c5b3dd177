/**
 * The one request builder (src/upstream/request.ts): each engine's rules as
 * data, each rule from the engine's source (the comment by each test names the
 * file and commit; the stand-ins under test/e2e/stand-ins/ behave the same, and
 * test/e2e/engines.test.ts runs the client suite against them).
 */
import { describe, expect, it } from "vitest";
import { UpstreamError, type CompletionRequest } from "../../src/upstream/engine.js";
import { ENGINE_RULES, engineRequest, HARMONY_SPECIAL_NAMES } from "../../src/upstream/request.js";

const KINDS = ["vllm", "sglang", "trtllm", "llamacpp"] as const;
const prompt = [200006, 1428, 200008, 12194, 200007, 200006, 173781];

function req(extra: Partial<CompletionRequest> = {}): CompletionRequest {
  return { client: { model: "gpt-oss" }, prompt, n: 1, maxTokens: undefined, ...extra };
}

const NULLS = {
  model: "gpt-oss",
  temperature: null,
  top_p: null,
  top_k: null,
  min_p: null,
  presence_penalty: null,
  frequency_penalty: null,
  repetition_penalty: null,
  seed: null,
  logit_bias: null,
  user: null,
};

describe("engineRequest", () => {
  it.each(KINDS)("%s: no null is ever sent, whichever field the client sent as null", (kind) => {
    const { body } = engineRequest(ENGINE_RULES[kind], req({ client: NULLS }), { ids: ["openai/gpt-oss-20b"], context: 4096 });
    expect(Object.entries(body).filter(([, v]) => v === null)).toEqual([]);
  });

  it("the nulls each engine refuses, from its request model", () => {
    // sgl-project/sglang python/sglang/srt/entrypoints/openai/protocol.py @ 004c82e07d876f6e4a0ad6e15325706b0f478f1a:
    // CompletionRequest's temperature, top_p, top_k, min_p, presence/frequency/repetition penalty are not Optional
    expect([...ENGINE_RULES.sglang.refusesNull].sort()).toEqual(
      ["frequency_penalty", "min_p", "presence_penalty", "repetition_penalty", "temperature", "top_k", "top_p"].sort(),
    );
    // NVIDIA/TensorRT-LLM tensorrt_llm/serve/openai_protocol.py @ 0076e9390e1ed11515f149eec356f5a03f4a00d8:
    // `top_k: int = 0`, `min_p: float = 0.0`, `repetition_penalty: float = 1.0`
    expect([...ENGINE_RULES.trtllm.refusesNull].sort()).toEqual(["min_p", "repetition_penalty", "top_k"]);
    // vllm-project/vllm vllm/entrypoints/openai/completion/protocol.py @ 002032ee2b18e1f7bd924ec47b62504ba3866063:
    // every sampling field is `X | None`
    expect(ENGINE_RULES.vllm.refusesNull).toEqual([]);
    // ggml-org/llama.cpp tools/server json_value (index excerpt): "Fallback null to default value"
    expect(ENGINE_RULES.llamacpp.refusesNull).toEqual([]);
  });

  it.each(KINDS)("%s: `stop` is never sent (the sidecar applies it to the answer)", (kind) => {
    const { body } = engineRequest(ENGINE_RULES[kind], req({ client: { model: "gpt-oss", stop: ["END"] } }), null);
    expect(body.stop).toBeUndefined();
  });

  it("each engine's limit field and how it is filled without a client value", () => {
    const served = { ids: ["m"], context: 1000 };
    // vLLM: max_tokens defaults to 16 (protocol.py @ 002032ee): the context left is sent
    expect(engineRequest(ENGINE_RULES.vllm, req(), served)).toMatchObject({
      body: { max_tokens: 1000 - prompt.length },
      limit: 1000 - prompt.length,
    });
    // SGLang refuses prompt + max_new_tokens >= context (tokenizer_manager.py _validate_one_request, index excerpt): one less
    expect(engineRequest(ENGINE_RULES.sglang, req(), served).limit).toBe(1000 - prompt.length - 1);
    // trtllm-serve deduces max_seq_len - prompt itself (base_worker.py _deduce_max_tokens, index excerpt): nothing sent
    const t = engineRequest(ENGINE_RULES.trtllm, req(), served);
    expect([t.body.max_tokens, t.limit]).toEqual([undefined, null]);
    // llama-server's n_predict (server-task.cpp @ 00efb3e1 params_from_json_cmpl)
    expect(engineRequest(ENGINE_RULES.llamacpp, req(), served)).toMatchObject({ body: { n_predict: 1000 - prompt.length } });
    // the client's limit is the one each choice is cut at, for every engine
    for (const kind of KINDS) expect(engineRequest(ENGINE_RULES[kind], req({ maxTokens: 7 }), served).limit).toBe(7);
  });

  it("trtllm-serve takes n = 1 only: its stream post-processor sends every choice on every step", () => {
    // NVIDIA/TensorRT-LLM tensorrt_llm/serve/postprocess_handlers.py @ 01bf19231d29d8f0766e31c117d1cf39ed00d3d5
    // completion_stream_post_processor: `for output in rsp.outputs`, each with its token_ids_diff, which
    // executor/result.py _handle_sequence moves only for the sequence the response is for
    expect(() => engineRequest(ENGINE_RULES.trtllm, req({ n: 2 }), null)).toThrow(UpstreamError);
    expect(() => engineRequest(ENGINE_RULES.trtllm, req({ n: 2 }), null)).toThrow(/n must be 1 with trtllm-serve/);
    expect(engineRequest(ENGINE_RULES.vllm, req({ n: 2 }), null).body.n).toBe(2);
  });

  it("llama-server is asked for Harmony's specials as text (preserved_tokens), so that held ids can be read from the text", () => {
    // ggml-org/llama.cpp tools/server/server-task.cpp @ 00efb3e184262872916bf136b3df63c1822a19bd: each
    // `preserved_tokens` string that tokenizes to one id is preserved; server-context.cpp @ fb402660
    // accept_special_token writes a preserved special's text into content
    const { body } = engineRequest(ENGINE_RULES.llamacpp, req(), null);
    expect(body.preserved_tokens).toEqual(HARMONY_SPECIAL_NAMES);
    expect(HARMONY_SPECIAL_NAMES).toEqual(
      expect.arrayContaining(["<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>"]),
    );
  });

  it("each engine's Prometheus endpoint: trtllm-serve's is /prometheus/metrics", () => {
    // NVIDIA/TensorRT-LLM tensorrt_llm/serve/openai_server.py @ 00057725d9a6591f033e44f31c219e2426827bb7:
    // /metrics is get_iteration_stats (JSON), mount_metrics puts Prometheus text at /prometheus/metrics
    expect(KINDS.map((k) => ENGINE_RULES[k].metricsPath)).toEqual(["/metrics", "/metrics", "/prometheus/metrics", "/metrics"]);
  });

  it("the model sent: the client's when served, else the first served; trtllm-serve's is required; llama-server takes none", () => {
    const served = { ids: ["openai/gpt-oss-20b"], context: null };
    expect(engineRequest(ENGINE_RULES.vllm, req(), served).body.model).toBe("openai/gpt-oss-20b");
    expect(
      engineRequest(ENGINE_RULES.vllm, req({ client: { model: "openai/gpt-oss-20b" } }), {
        ids: ["x", "openai/gpt-oss-20b"],
        context: null,
      }).body.model,
    ).toBe("openai/gpt-oss-20b");
    expect(engineRequest(ENGINE_RULES.sglang, req({ client: {} }), null).body.model).toBe("default");
    expect(engineRequest(ENGINE_RULES.trtllm, req(), null).body.model).toBe("gpt-oss");
    expect("model" in engineRequest(ENGINE_RULES.llamacpp, req(), null).body).toBe(false);
  });
});
