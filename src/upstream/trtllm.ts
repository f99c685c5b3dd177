/**
 * The TensorRT-LLM engine (`trtllm-serve`): its OpenAI-style
 * `POST /v1/completions`, driven with token ids (`prompt` as ids,
 * `detokenize: false`: chunks carry `token_ids` and an empty `text`), read as
 * server-sent events.
 *
 * Read in TensorRT-LLM's source (repository NVIDIA/TensorRT-LLM; the commit is
 * the version the code index held):
 * - tensorrt_llm/serve/openai_protocol.py @ 0076e9390e1ed11515f149eec356f5a03f4a00d8
 *   `OpenAIBaseModel` (`extra="forbid"`: an unknown request field is refused), so only
 *   fields of `CompletionRequest` are sent: `model` (required), `prompt` (ids),
 *   `max_tokens: Optional[int] = None`, `n`, `stream_options` (`include_usage` defaults
 *   to true), `stop_token_ids`, `include_stop_str_in_output`, `skip_special_tokens`,
 *   `detokenize: bool = True`, `top_k`, `min_p`, `repetition_penalty`, `seed`, `stop`,
 *   `logit_bias`, `user`; `ModelCard` has no context length (`owned_by: "tensorrt_llm"`);
 *   `CompletionResponseStreamChoice` (`token_ids`, `finish_reason`, `stop_reason`).
 * - tensorrt_llm/serve/postprocess_handlers.py @ 01bf19231d29d8f0766e31c117d1cf39ed00d3d5
 *   `completion_stream_post_processor`: `text = ""` and `token_ids = token_ids_diff` when
 *   `detokenize` is false (`token_ids: null` otherwise), index = prompt_idx * n + output
 *   index, chunks dumped with `exclude_unset=False` (`"usage": null`), the usage chunk
 *   (`prompt_tokens_details.cached_tokens`) once the request is done.
 * - tensorrt_llm/serve/openai_server.py @ 00057725d9a6591f033e44f31c219e2426827bb7
 *   `openai_completion` (the model name is not checked; an exception before streaming →
 *   400 `{"object":"error","message",…,"code":400}`; one raised mid-stream breaks the
 *   connection, no error event, no `[DONE]`), `generator_wrapper` (`data: [DONE]`),
 *   `RequestValidationError` → 400 `{"error": "<pydantic message>"}`, `/v1/models`,
 *   `/health`, `/version`.
 * - tensorrt_llm/executor/result.py (index excerpt, `_handle_sequence`): finish reasons
 *   "stop" (END_ID or STOP_WORDS), "length", "timeout", "cancelled"; a stop id is cut off
 *   `token_ids` unless `include_stop_str_in_output`.
 * - tensorrt_llm/executor/base_worker.py `_deduce_max_tokens` (index excerpt):
 *   `max_tokens` None → `max_seq_len - prompt`; a larger `max_tokens` is lowered to it.
 *
 * So `max_tokens` is sent only when the client gave one: TensorRT-LLM fills the
 * context by itself. A `trtllm-serve` without `detokenize` refuses the request
 * (unknown field): token ids cannot be had from it, a 502 that says so. The
 * request is built from `ENGINE_RULES.trtllm` (./request.ts): no nulls (its
 * `CompletionRequest` refuses them for `top_k`, `min_p`, `repetition_penalty`),
 * and `n` = 1 only: its stream post-processor sends every choice on every step
 * (`for output in rsp.outputs`), a choice that did not move with its last
 * `token_ids_diff` again (executor/result.py `_handle_sequence` moves the diff
 * of the one sequence a response is for), so streamed choices duplicate ids.
 */
import { streamCompletions } from "./completions.js";
import { UpstreamError, type CompletionRequest, type Engine, type EventAnswer, type OnChunk, type UpstreamConfig } from "./engine.js";
import { ENGINE_RULES, engineRequest } from "./request.js";
import { listModels, ServedModelsCache } from "./vllm.js";

/** TensorRT-LLM's finish reasons onto the ones generate.ts knows: timeout and cancelled end cut short. */
export function trtllmFinish(f: unknown): string | null {
  if (typeof f !== "string") return null;
  if (f === "stop" || f === "length") return f;
  return "abort";
}

export class TrtllmEngine implements Engine {
  private readonly rules = ENGINE_RULES.trtllm;
  private readonly served = new ServedModelsCache(
    () => this.models(),
    () => true,
  );

  constructor(private readonly cfg: UpstreamConfig) {}

  async stream(request: CompletionRequest, signal: AbortSignal, onChunk: OnChunk, onDrained?: () => EventAnswer): Promise<void> {
    const m = await this.served.get();
    // ModelCard has no context length: trtllm-serve fills max_seq_len - prompt itself
    const er = engineRequest(this.rules, request, m && { ids: m.ids, context: null });
    try {
      await streamCompletions(this.rules, this.cfg, request, er, signal, { finish: trtllmFinish }, onChunk, onDrained);
    } catch (e) {
      // extra="forbid": a trtllm-serve that predates `detokenize` refuses it by name
      if (
        e instanceof UpstreamError &&
        e.upstreamStatus === 400 &&
        /detokenize/.test(e.message) &&
        /extra|permitted|forbidden/i.test(e.message)
      ) {
        throw new UpstreamError(502, "upstream_bad_response", `${this.rules.noIds} (${e.message})`, 400);
      }
      throw e;
    }
  }

  models(): Promise<{ status: number; body: string }> {
    return listModels(this.cfg);
  }

  kind(): Promise<"trtllm"> {
    return Promise.resolve("trtllm");
  }
}
