/**
 * The SGLang engine: its OpenAI-style `POST /v1/completions`, driven with
 * token ids (`prompt` as ids, `return_token_ids: true`), read as server-sent
 * events.
 *
 * Read in SGLang's source (repository sgl-project/sglang; the commit is the
 * version the code index held):
 * - python/sglang/srt/entrypoints/openai/protocol.py @ 004c82e07d876f6e4a0ad6e15325706b0f478f1a
 *   `CompletionRequest` (a plain pydantic `BaseModel`: unknown fields are ignored, not
 *   refused; `max_tokens: int = 16`, positive; `return_token_ids: bool = False`;
 *   `stop_token_ids`, `skip_special_tokens`, `no_stop_trim`, `top_k`, `min_p`,
 *   `repetition_penalty`, `logit_bias`, `seed`), `CompletionResponseStreamChoice`
 *   (`finish_reason` one of "stop", "length", "content_filter", "abort";
 *   `matched_stop`; `token_ids` dropped from the chunk when None), `ModelCard.max_model_len`,
 *   `UsageInfo` (with `reasoning_tokens`), the flat `ErrorResponse`.
 * - python/sglang/srt/entrypoints/openai/serving_completions.py @ 004c82e07d876f6e4a0ad6e15325706b0f478f1a
 *   `_build_sampling_params` (`max_tokens` → `max_new_tokens`, `seed` → `sampling_seed`),
 *   `_generate_completion_stream`: one choice per chunk, `token_ids` = the new slice of
 *   `output_ids` when `return_token_ids`, `prompt_token_ids` on the first chunk, an
 *   abort carrying an HTTP status → `data: {"error": …}` then `[DONE]`, a graceful abort
 *   → `finish_reason: "abort"`, the usage chunk (`exclude_none`), `[DONE]` always;
 *   the first chunk is awaited before the 200 (a `ValueError` is a 400).
 * - python/sglang/srt/managers/detokenizer_manager.py @ 000935bdda57675933def88a37dcd6786a2de0d1
 *   `trim_matched_stop` trims the matched stop token from the text only; `output_ids` are
 *   the decode ids untrimmed, so the stop id stays in `token_ids`.
 * - python/sglang/srt/managers/tokenizer_manager.py (`_validate_one_request`, read in an
 *   index excerpt): a prompt of `context_len` tokens or more is refused, and so is
 *   `max_new_tokens + prompt >= context_len` ("Requested token count exceeds the model's
 *   maximum context length of L tokens…"): the room is `context_len - prompt - 1`.
 * - python/sglang/srt/entrypoints/http_server.py (`available_models`, index excerpts):
 *   `max_model_len = tokenizer_manager.model_config.context_len`, `owned_by: "sglang"`.
 *
 * An SGLang older than `return_token_ids` on `/v1/completions` ignores the field and
 * streams text only: that is a 502 here, never an empty answer. The request is
 * built from `ENGINE_RULES.sglang` (./request.ts: no nulls, which its
 * `CompletionRequest` refuses for most sampling fields).
 */
import { streamCompletions } from "./completions.js";
import type { CompletionRequest, Engine, EventAnswer, OnChunk, UpstreamConfig } from "./engine.js";
import { ENGINE_RULES, engineRequest } from "./request.js";
import { listModels, ServedModelsCache } from "./vllm.js";

/** SGLang's finish reasons onto the ones generate.ts knows: content_filter and abort end cut short. */
export function sglangFinish(f: unknown): string | null {
  if (typeof f !== "string") return null;
  if (f === "stop" || f === "length") return f;
  return "abort";
}

export class SglangEngine implements Engine {
  private readonly rules = ENGINE_RULES.sglang;
  private readonly served = new ServedModelsCache(
    () => this.models(),
    (m) => m.maxModelLen !== null,
  );

  constructor(private readonly cfg: UpstreamConfig) {}

  async stream(request: CompletionRequest, signal: AbortSignal, onChunk: OnChunk, onDrained?: () => EventAnswer): Promise<void> {
    const m = await this.served.get();
    const er = engineRequest(this.rules, request, m && { ids: m.ids, context: m.maxModelLen });
    await streamCompletions(this.rules, this.cfg, request, er, signal, { finish: sglangFinish }, onChunk, onDrained);
  }

  models(): Promise<{ status: number; body: string }> {
    return listModels(this.cfg);
  }

  kind(): Promise<"sglang"> {
    return Promise.resolve("sglang");
  }
}
