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
 * streams text only: that is a 502 here, never an empty answer.
 */
import { isObj } from "../core/json.js";
import {
  logprobsRefused,
  stopIds,
  OPENAI_SAMPLING_FIELDS,
  UpstreamError,
  type CompletionRequest,
  type Engine,
  type UpstreamChunk,
  type UpstreamConfig,
  type UpstreamUsage,
} from "./engine.js";
import { getText, postSse } from "./sse.js";
import { ServedModelsCache, type ServedModels } from "./vllm.js";

/**
 * The `/v1/completions` body. `max_tokens` is always sent (SGLang takes 16
 * otherwise): the client's, else the room the context leaves (SGLang refuses
 * prompt + max_tokens ≥ context, so one less than vLLM's).
 */
export function sglangBody(r: CompletionRequest, served: ServedModels | null): Record<string, unknown> {
  const asked = r.client.model;
  const model = served && served.ids.length > 0 && !(typeof asked === "string" && served.ids.includes(asked)) ? served.ids[0] : asked;
  const body: Record<string, unknown> = {
    model: typeof model === "string" ? model : "default",
    prompt: r.prompt,
    stream: true,
    stream_options: { include_usage: true },
    return_token_ids: true,
    skip_special_tokens: false,
    stop_token_ids: stopIds(r),
    n: r.n,
  };
  const ctx = served?.maxModelLen ?? null;
  const room = ctx === null ? null : ctx - r.prompt.length - 1;
  if (typeof r.maxTokens === "number") {
    if (room !== null && r.maxTokens > room) {
      throw new UpstreamError(
        400,
        "context_length_exceeded",
        `the prompt has ${r.prompt.length} tokens and ${r.maxTokens} more were asked for; the model's context is ${ctx} tokens`,
      );
    }
    body.max_tokens = r.maxTokens;
  } else if (room !== null) {
    if (room < 1)
      throw new UpstreamError(400, "context_length_exceeded", `the prompt has ${r.prompt.length} tokens; the model's context is ${ctx}`);
    body.max_tokens = room;
  }
  for (const k of OPENAI_SAMPLING_FIELDS) if (r.client[k] !== undefined) body[k] = r.client[k];
  return body;
}

/** SGLang's finish reasons onto the ones generate.ts knows: content_filter and abort end cut short. */
export function sglangFinish(f: unknown): string | null {
  if (typeof f !== "string") return null;
  if (f === "stop" || f === "length") return f;
  return "abort";
}

export class SglangEngine implements Engine {
  private readonly served = new ServedModelsCache(
    () => this.models(),
    (m) => m.maxModelLen !== null,
  );

  constructor(private readonly cfg: UpstreamConfig) {}

  async *complete(request: CompletionRequest, signal: AbortSignal): AsyncGenerator<UpstreamChunk> {
    if (request.logprobs !== undefined) throw logprobsRefused("sglang");
    const body = sglangBody(request, await this.served.get());
    for await (const chunk of postSse("/v1/completions", body, { baseUrl: this.cfg.url, idleTimeoutMs: this.cfg.idleTimeoutMs, signal })) {
      const choices = Array.isArray(chunk.choices) ? (chunk.choices as unknown[]) : [];
      if (choices.some((c) => !isObj(c) || !Array.isArray(c.token_ids))) {
        throw new UpstreamError(
          502,
          "upstream_bad_response",
          "upstream does not return token ids; an SGLang with return_token_ids on /v1/completions is needed",
        );
      }
      yield {
        choices: (choices as Record<string, unknown>[]).map((c) => ({
          index: typeof c.index === "number" ? c.index : 0,
          token_ids: c.token_ids as number[],
          finish_reason: sglangFinish(c.finish_reason),
        })),
        usage: isObj(chunk.usage) ? (chunk.usage as unknown as UpstreamUsage) : null,
      };
    }
  }

  models(): Promise<{ status: number; body: string }> {
    return getText(this.cfg.url, "/v1/models", this.cfg.idleTimeoutMs);
  }
}
