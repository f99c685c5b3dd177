/**
 * A faithful stand-in for vLLM's OpenAI-compatible server, written from vLLM's
 * own source, for tests without a GPU. It is the engine as the sidecar sees
 * it: `POST /v1/completions` (streaming and not) driven by token ids,
 * `GET /v1/models`, `GET /health`, `POST /tokenize`, `POST /detokenize`,
 * `GET /metrics`, `GET /version`. What the "model" samples is scripted; what
 * vLLM does with it (max_tokens default and context cap, stop ids and
 * generation-config EOS ids, stream-interval batching, n interleaved choices,
 * finish reasons, error frames, usage) is vLLM's.
 *
 * Sources read (repository vllm-project/vllm; the commit is the version the
 * code index held for each file):
 * - vllm/entrypoints/openai/completion/protocol.py @ 002032ee2b18e1f7bd924ec47b62504ba3866063
 *   CompletionRequest: `max_tokens: int | None = 16`, `normalize_null_max_tokens`
 *   (an explicit null becomes 16), `return_token_ids`, `stop_token_ids`,
 *   `include_stop_str_in_output`, `skip_special_tokens`, `logprobs`, `stream_interval`,
 *   `repetition_detection`, `validate_stream_options`, `validate_prompt_and_prompt_embeds`;
 *   `build_tok_params` (max_output_tokens = max_tokens or 0); `to_sampling_params`
 *   (server-default stop ids merged after the request's); the stream/response choice models.
 * - vllm/entrypoints/openai/completion/serving.py @ 030ea52effcb05071543c8c42b8f0145e94cee43
 *   `completion_stream_generator`: one choice per chunk, `prompt_token_ids` on each
 *   choice's first chunk only when `return_token_ids`, `token_ids` per chunk (null
 *   otherwise), empty first outputs skipped, `_raise_if_error` on finish "error",
 *   chunks dumped with `exclude_unset=True` (no `usage` key), the usage chunk
 *   (`exclude_none=True`), `except GenerationError / Exception` -> `data: {"error": …}`,
 *   then `data: [DONE]` always; `request_output_to_completion_response` (non-streaming).
 * - vllm/entrypoints/openai/serving_completion.py @ 00463e627b4cbe549b5e9815a2bdb0100ae88ea9
 *   the same generator between PR #22587 and PR #27561 (profile "v0.10.2"): chunks dumped
 *   with `exclude_unset=False` (`"usage": null`), `prompt_token_ids` on the first chunk
 *   even without `return_token_ids`, and `finish_reason == "abort"` raised as
 *   `ValueError(stop_reason)` -> an error frame (non-streaming: a 400).
 * - vllm/entrypoints/openai/serving_engine.py @ 7ded96b3c73f63400cdb048a73c34292ba862d99
 *   (profile "v0.10.0"): `_validate_input`'s 400 "This model's maximum context length is N
 *   tokens. However, you requested …", the flat `ErrorResponse` (`object: "error"`), and
 *   `create_streaming_error_response` = `{"error": ErrorResponse.model_dump()}`.
 * - vllm/entrypoints/openai/engine/protocol.py @ 040a2cc2a6295ea9c313d86526ff90a103eacb3e
 *   `OpenAIBaseModel` (`extra="allow"`: unknown request fields are ignored with a log
 *   warning — why a vLLM without `return_token_ids` answers 200 without ids),
 *   `ErrorInfo`/`ErrorResponse` (nested since PR #22099, v0.10.1), `ModelCard.max_model_len`,
 *   `UsageInfo` field order, `StreamOptions.include_usage` default True.
 * - vllm/entrypoints/serve/utils/api_utils.py @ 00a5fdd20935ba7679750db22997dcf539ca4591
 *   `get_max_tokens` (min of max_model_len - prompt, max_tokens, generation-config
 *   max_new_tokens), `should_include_usage`, `validate_json_request`.
 * - vllm/entrypoints/serve/utils/error_response.py @ 1c6ebf2c6b4f0604b68a07980ab01791671ba52c
 *   `create_error_response` (VLLMValidationError -> 400 with `param`; other exceptions -> 500).
 * - the serving base class (`create_streaming_error_response`, `_raise_if_error`:
 *   finish "error" -> GenerationError("Internal server error") -> InternalServerError 500),
 *   imported by completion/serving.py from vllm/entrypoints/generate/base/serving.py (index
 *   listing @ 62effaeeea0794f59cffc1926fe1f81ee631560a); read as an index excerpt.
 * - vllm/renderers/params.py @ 017638d70159114c71e4c28cc95f54c3f7699079 (same text @
 *   1aa021e827032484a7f89194c7e528fc40655204): `TokenizeParams` — max_tokens greater than
 *   max_model_len, and `_token_len_check`'s 400 ("You passed N input tokens and requested M
 *   output tokens. However, the model's context length is only L tokens …").
 * - vllm/exceptions.py @ f984edf698e863600a1f5973c283fa9595c8707c: VLLMValidationError's
 *   message suffix " (parameter=…, value=…)".
 * - vllm/sampling_params.py @ 00388f6573ccfcffad607b8c9ecdf341a4669ceb: `from_optional`,
 *   stop_token_ids de-duplicated, `_verify_args` (max_tokens >= 1; n must be 1 when greedy),
 *   `update_from_generation_config` (generation-config EOS ids other than the tokenizer's
 *   EOS join `stop_token_ids` unless `ignore_eos`).
 * - vllm/v1/core/sched/utils.py @ 018d5dc78efa9af8a03457451b6f27d56bf3b9c2: `check_stop`
 *   (min_tokens; tokenizer EOS -> stop, stop_reason None; a stop id -> stop, stop_reason =
 *   the id; prompt + output >= max_model_len or output >= max_tokens -> length; repetition
 *   -> stop_reason "repetition_detected") and `check_sequence_repetition`.
 * - vllm/v1/engine/detokenizer.py @ e372329d90d7d12e3957ac21c4097fd9bb79192c: the stop
 *   token stays in `token_ids` but is left out of the text unless include_stop_str_in_output.
 * - vllm/v1/engine/output_processor.py @ d07822605346f767b672503c9aae85aa23ef2d82: stream
 *   interval (first token alone, then every `interval` tokens, the rest with the finish);
 *   `abort_requests` puts a last output with no new ids and finish ABORT.
 * - FinishReason strings ("stop", "length", "abort", "error", "repetition") of
 *   vllm/v1/engine/__init__.py and `_FINISHED_REASON_MAP` of vllm/v1/request.py
 *   (FINISHED_REPETITION -> REPETITION, FINISHED_ERROR -> ERROR): the index's stored
 *   versions of those two files are older (b823d0262737…, 000a0d5f815c…); the current
 *   text was read in index excerpts only.
 * - /health (200 empty, 503 on EngineDeadError): vllm/entrypoints/serve/instrumentator/health.py,
 *   `TokenizeResponse {count, max_model_len, tokens, token_strs}`, and the
 *   `vllm:num_requests_running` / `vllm:num_requests_waiting` / `vllm:kv_cache_usage_perc`
 *   gauges with labels `model_name`, `engine` of vllm/v1/metrics/loggers.py (index listing
 *   @ a6f0308cfe806b7731ad4979c9bea6e470c35efd): read in index excerpts.
 * - vllm/v1/engine/detokenizer.py @ e372329d90d7d12e3957ac21c4097fd9bb79192c
 *   `BaseIncrementalDetokenizer.update`: after each step's ids the stop strings are looked for
 *   in `output_text`, the text of the whole completion (reasoning and, with
 *   `skip_special_tokens: false`, every special's text included); the first found ends the
 *   request with finish "stop" and `stop_reason` = the string, the text cut before it.
 * - vllm/entrypoints/serve/middleware/authenticate.py @ baaf6e9c171b38e155d4191ac29f3a4a08817146
 *   (`--api-key`): paths under /v1, /v2, /inference, /cohere without `Authorization: Bearer
 *   <key>` answer 401 `{"error": "Unauthorized"}`; /health, /version, /metrics, /tokenize stay open.
 * - PR #22587 (`return_token_ids`, vLLM 0.10.2), PR #27561, PR #22099: issue threads.
 * - gpt-oss's generation_config.json `eos_token_id: [200002, 199999, 200012]` and tokenizer
 *   `eos_token: "<|return|>"` (200002): from third-party copies of the model files (the
 *   official model card was not in the index).
 *
 * Profiles: "current" (the newest tree above, default), "v0.10.2" (return_token_ids
 * present, abort as an error frame, `"usage": null` in chunks), "v0.10.0" (before
 * return_token_ids: the field is ignored, chunks carry text only; flat error bodies).
 * Where the older profiles' behaviour was not read in source, it is marked so below.
 *
 * Text: vLLM's `text` fields are present, holding a placeholder decoding — `[id]` for an
 * ordinary id, the token's name for a gpt-oss special (dropped when
 * `skip_special_tokens`, the default) — with the stop token left out as vLLM does.
 * The sidecar reads `token_ids`, and `logprobs` when a client asks for them: their values are
 * placeholders (-(1 + id mod 997) / 1000, the sampled id its only alternative).
 *
 * Faults that are not vLLM behaviour (an HTTP status, a hang, a broken socket, delays)
 * can be scripted too, so this stand-in can replace test/e2e/stand-in-vllm.ts.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
// the helpers vLLM's code gives both engines alike; the simulator models the current wire only, so the rest is the stand-in's own
import {
  hasRepetition,
  HttpFail,
  isIntList,
  logprobsOf,
  modelList,
  randomId,
  usageOf,
  validationMessage,
  VLLM_ROUTES,
} from "../../../src/simulate/vllm.js";
import { SPECIAL_TEXT } from "./recording.js";

type Obj = Record<string, unknown>;

export type VllmProfile = "current" | "v0.10.2" | "v0.10.0";

const FIRST_SPECIAL = 199998;

/** The server as vLLM is started: model, context, generation config, flags. */
export interface VllmConfig {
  profile: VllmProfile;
  /** `--served-model-name`; also the `model` of every answer. */
  servedModelName: string;
  /** `root` of the model card (the model path). */
  modelRoot: string;
  /** `--max-model-len`. */
  maxModelLen: number;
  /** The tokenizer's EOS id (gpt-oss: `<|return|>` 200002): stops with `stop_reason: null`. */
  eosTokenId: number | null;
  /** generation_config.json `eos_token_id`; the ids other than `eosTokenId` join `stop_token_ids`. */
  generationConfigEosTokenIds: number[];
  /** Server-default stop ids (`default_sampling_params.stop_token_ids`), merged after the request's. */
  defaultStopTokenIds: number[];
  /** generation_config `max_new_tokens` (`override_max_tokens`), or null. */
  maxNewTokens: number | null;
  /** `--stream-interval` (a request's `stream_interval` can only raise it). */
  streamInterval: number;
  /** `--enable-prompt-tokens-details`: usage carries `prompt_tokens_details.cached_tokens`. */
  enablePromptTokensDetails: boolean;
  /** `--enable-force-include-usage`. */
  forceIncludeUsage: boolean;
  /** `num_cached_tokens` reported for every request (prefix-cache hits). */
  cachedTokens: number;
  /** false: `/health` answers 503 (EngineDeadError). */
  healthy: boolean;
  /** Gauges reported on /metrics. */
  numRequestsWaiting: number;
  kvCacheUsage: number;
  /** The `version` of /version. */
  version: string;
  /** `--api-key` (null: none). */
  apiKey: string | null;
  /** Placeholder detokenizer and tokenizer (the stand-in has no real tokenizer). */
  decode: (id: number) => string;
  tokenize: (text: string) => number[];
}

export const GPT_OSS_20B: Readonly<Omit<VllmConfig, "decode" | "tokenize">> = Object.freeze({
  profile: "current",
  servedModelName: "openai/gpt-oss-20b",
  modelRoot: "openai/gpt-oss-20b",
  maxModelLen: 131072,
  eosTokenId: 200002,
  generationConfigEosTokenIds: [200002, 199999, 200012],
  defaultStopTokenIds: [],
  maxNewTokens: null,
  streamInterval: 1,
  enablePromptTokensDetails: false,
  forceIncludeUsage: false,
  cachedTokens: 0,
  healthy: true,
  numRequestsWaiting: 0,
  kvCacheUsage: 0,
  version: "0.0.0-stand-in",
  apiKey: null,
});

/** Per-choice value: one for every choice, or a list by choice index. */
export type PerChoice<T> = T | (T | undefined)[];

/** What the "model" samples for one request, and what happens to it. */
export interface Script {
  /**
   * The ids the model samples, per choice (one list: the same for every choice). vLLM's
   * stop checks cut them (stop ids, EOS, max_tokens, context, repetition). When a list
   * runs out first, the model samples the tokenizer EOS (or, with `ignore_eos`, the
   * choice ends as `length`).
   */
  tokens?: number[] | number[][];
  /** The engine aborts the choice after this many generated ids (`finish_reason: "abort"`). */
  abortAfter?: PerChoice<number>;
  /** The engine fails the choice after this many ids (finish "error" -> error frame, 500). */
  errorAfter?: PerChoice<number>;
  /** Repetition detected at this many ids (`finish_reason: "repetition"`). */
  repetitionAfter?: PerChoice<number>;
  /** Ids per engine step (speculative decoding); replaces the stream-interval batching. */
  chunkSizes?: number[];
  /** An exception in the stream generator after this many chunks: an error frame, then [DONE]. */
  midStreamError?: { afterChunks: number; message?: string; type?: string; code?: number };
  /** Overrides of the server config for this request (e.g. `{ profile: "v0.10.0" }`). */
  config?: Partial<VllmConfig>;
  // ---- faults that are not vLLM behaviour
  /** Answer with this HTTP status and body instead. */
  status?: number;
  errorBody?: string | Obj;
  /** Close the socket, without [DONE], after this many chunks. */
  breakAfterChunks?: number;
  /** Send headers and nothing more. */
  hang?: boolean;
  /** Delay between chunks. */
  delayMs?: number;
}

export interface Received {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The body parsed as JSON (undefined when empty or not JSON). */
  body: Obj | undefined;
  rawBody: string;
  /** The client went away before the answer ended. */
  aborted: boolean;
  /** The status answered. */
  status: number;
  /** For streams: each SSE `data:` payload sent, parsed ("[DONE]" as the string). */
  events: unknown[];
}

export interface VllmStandIn {
  url: string;
  config: VllmConfig;
  received: Received[];
  /** Only the `/v1/completions` requests. */
  completions(): Received[];
  /** Scripts are taken in order, one per `/v1/completions` request; the last repeats. */
  script(...s: Script[]): void;
  /**
   * A model that reads its prompt: each `/v1/completions` request's script
   * is `fn(body)` (the request as sent), until `script()` is called again.
   * For clients' tool loops, where what the model samples depends on the
   * turn (test/e2e/clients/harness.ts).
   */
  respond(fn: (body: Obj) => Script): void;
  /** Change the server config (e.g. `set({ profile: "v0.10.0" })`). */
  set(c: Partial<VllmConfig>): void;
  close(): Promise<void>;
}

// ------------------------------------------------------------------ errors

/** The error body: nested since PR #22099 (v0.10.1), flat `object: "error"` before. */
function errorBody(p: VllmProfile, f: HttpFail): Obj {
  if (p === "v0.10.0") return { object: "error", message: f.message, type: f.type, param: f.param, code: f.status };
  return { error: { message: f.message, type: f.type, param: f.param, code: f.status } };
}

/** A mid-stream error frame's payload: `{"error": {...}}` in every profile. */
function streamError(p: VllmProfile, message: string, type: string, code: number): Obj {
  if (p === "v0.10.0") return { error: { object: "error", message, type, param: null, code } };
  return { error: { message, type, param: null, code } };
}

// ------------------------------------------------------------------ sampling

interface Plan {
  profile: VllmProfile;
  model: string;
  prompts: number[][];
  n: number;
  stream: boolean;
  /** Per prompt: `get_max_tokens`. */
  maxTokens: number[];
  minTokens: number;
  eos: number | null;
  stopIds: number[];
  /** Stop strings, looked for in the completion's text. */
  stop: string[];
  includeStop: boolean;
  skipSpecial: boolean;
  returnTokenIds: boolean;
  logprobs: number | null;
  asTokenIds: boolean;
  includeUsage: boolean;
  continuousUsage: boolean;
  interval: number;
  repetition: { min_pattern_size: number; max_pattern_size: number; min_count: number } | null;
}

/** CompletionRequest's validators, the renderer's length checks and SamplingParams' checks. */
function plan(body: Obj, cfg: VllmConfig): Plan {
  const p = cfg.profile;
  const current = p === "current";
  // normalize_null_max_tokens: absent or null -> 16
  const maxTokens = body.max_tokens === undefined || body.max_tokens === null ? 16 : body.max_tokens;
  if (typeof maxTokens !== "number" || !Number.isInteger(maxTokens))
    throw new HttpFail(400, "max_tokens must be an integer", "BadRequestError", "max_tokens");
  if (current && body.stream_options && !body.stream)
    throw new HttpFail(
      400,
      validationMessage("Stream options can only be defined when `stream=True`.", "stream_options"),
      "BadRequestError",
      "stream_options",
    );
  const prompt = body.prompt;
  let prompts: number[][];
  if (isIntList(prompt) && prompt.length > 0) prompts = [prompt];
  else if (Array.isArray(prompt) && prompt.length > 0 && prompt.every(isIntList)) prompts = prompt as number[][];
  else if (typeof prompt === "string" && prompt !== "") prompts = [cfg.tokenize(prompt)];
  else if (Array.isArray(prompt) && prompt.length > 0 && prompt.every((x) => typeof x === "string"))
    prompts = (prompt as string[]).map(cfg.tokenize);
  else
    throw new HttpFail(
      400,
      validationMessage("Either prompt or prompt_embeds must be provided and non-empty.", "prompt"),
      "BadRequestError",
      "prompt",
    );
  if (typeof body.model === "string" && body.model !== cfg.servedModelName)
    throw new HttpFail(404, `The model \`${body.model}\` does not exist.`, "NotFoundError");
  const L = cfg.maxModelLen;
  if (current && maxTokens > L)
    throw new HttpFail(
      400,
      validationMessage(
        `max_tokens=${maxTokens}cannot be greater than max_model_len=max_total_tokens=${L}. Please request fewer output tokens.`,
        "max_tokens",
        maxTokens,
      ),
      "BadRequestError",
      "max_tokens",
    );
  for (const ids of prompts) {
    if (current) {
      // renderers/params.py _token_len_check: max_input_tokens = max_model_len - (max_tokens or 0)
      const maxInput = L - maxTokens;
      if (ids.length > maxInput)
        throw new HttpFail(
          400,
          validationMessage(
            `You passed ${ids.length} input tokens and requested ${maxTokens} output tokens. However, the model's context length is only ${L} tokens, resulting in a maximum input length of ${maxInput} tokens. Please reduce the length of the input prompt.`,
            "input_tokens",
            ids.length,
          ),
          "BadRequestError",
          "input_tokens",
        );
    } else if (ids.length + maxTokens > L) {
      // serving_engine.py _validate_input @7ded96b3 (for "v0.10.2" not read in source: assumed)
      throw new HttpFail(
        400,
        `This model's maximum context length is ${L} tokens. However, you requested ${maxTokens + ids.length} tokens (${ids.length} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
      );
    }
  }
  if (maxTokens < 1)
    throw new HttpFail(
      400,
      validationMessage(`max_tokens must be at least 1, got ${maxTokens}.`, "max_tokens", maxTokens),
      "BadRequestError",
      "max_tokens",
    );
  const n = body.n === undefined || body.n === null ? 1 : body.n;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1) throw new HttpFail(400, `n must be at least 1, got ${String(n)}.`);
  const temperature = typeof body.temperature === "number" ? body.temperature : 1.0;
  if (current && temperature < 1e-5 && n > 1) throw new HttpFail(400, `n must be 1 when using greedy sampling, got ${n}.`);
  const ignoreEos = body.ignore_eos === true;
  // to_sampling_params: request stop ids, then server defaults; SamplingParams de-duplicates
  const requested = isIntList(body.stop_token_ids) ? body.stop_token_ids : [];
  let stopIds = [...new Set([...requested, ...cfg.defaultStopTokenIds])];
  // update_from_generation_config: the other generation-config EOS ids join stop_token_ids
  const extraEos = new Set(cfg.generationConfigEosTokenIds);
  if (cfg.eosTokenId !== null) extraEos.delete(cfg.eosTokenId);
  if (extraEos.size > 0 && !ignoreEos) stopIds = [...new Set([...extraEos, ...stopIds])];
  const so = body.stream_options as Obj | null | undefined;
  // should_include_usage (StreamOptions.include_usage defaults to True when stream_options is given)
  const includeUsage = cfg.forceIncludeUsage || (!!so && so.include_usage !== false && so.include_usage !== null);
  const continuousUsage = cfg.forceIncludeUsage || (includeUsage && so?.continuous_usage_stats === true);
  const rd = body.repetition_detection as Obj | null | undefined;
  const requestInterval = typeof body.stream_interval === "number" ? body.stream_interval : 1;
  return {
    profile: p,
    model: cfg.servedModelName,
    prompts,
    n,
    stream: body.stream === true,
    maxTokens: prompts.map((ids) => Math.min(...[L - ids.length, maxTokens, cfg.maxNewTokens ?? Infinity])),
    minTokens: typeof body.min_tokens === "number" ? body.min_tokens : 0,
    eos: ignoreEos ? null : cfg.eosTokenId,
    stopIds,
    stop:
      typeof body.stop === "string"
        ? [body.stop]
        : Array.isArray(body.stop)
          ? (body.stop as unknown[]).filter((x): x is string => typeof x === "string")
          : [],
    includeStop: body.include_stop_str_in_output === true,
    skipSpecial: body.skip_special_tokens !== false,
    // before PR #22587 the field is unknown: OpenAIBaseModel ignores it
    returnTokenIds: p !== "v0.10.0" && body.return_token_ids === true,
    logprobs: typeof body.logprobs === "number" ? body.logprobs : null,
    asTokenIds: body.return_tokens_as_token_ids === true,
    includeUsage,
    continuousUsage,
    interval: current ? Math.max(cfg.streamInterval, requestInterval) : cfg.streamInterval,
    repetition:
      rd && typeof rd === "object"
        ? {
            min_pattern_size: Number(rd.min_pattern_size ?? 0),
            max_pattern_size: Number(rd.max_pattern_size ?? 0),
            min_count: Number(rd.min_count ?? 0),
          }
        : null,
  };
}

type Terminal =
  | { kind: "finish"; reason: "stop" | "length" | "repetition"; stopReason: number | string | null; stopToken: boolean }
  | { kind: "abort" }
  | { kind: "error" };

interface Run {
  ids: number[];
  end: Terminal;
}

function pick<T>(v: PerChoice<T> | undefined, i: number): T | undefined {
  return Array.isArray(v) ? v[i] : v;
}

/** One choice through the scheduler's check_stop, token by token. */
function runChoice(
  tokens: readonly number[],
  s: Script,
  i: number,
  pl: Plan,
  promptLen: number,
  maxModelLen: number,
  maxTokens: number,
  decode: (id: number) => string = defaultDecode,
): Run {
  const out: number[] = [];
  const abortAt = pick(s.abortAfter, i);
  const errorAt = pick(s.errorAfter, i);
  const repAt = pick(s.repetitionAfter, i);
  const check = (): Terminal | null => {
    if (out.length < pl.minTokens) return null;
    const last = out[out.length - 1]!;
    if (pl.eos !== null && last === pl.eos) return { kind: "finish", reason: "stop", stopReason: null, stopToken: true };
    if (pl.stopIds.includes(last)) return { kind: "finish", reason: "stop", stopReason: last, stopToken: true };
    if (pl.stop.length > 0) {
      // detokenizer.py: the stop strings are looked for in the text of the whole completion
      const text = out
        .filter((id) => !(pl.skipSpecial && id >= FIRST_SPECIAL))
        .map(decode)
        .join("");
      const hit = pl.stop.find((st) => text.includes(st));
      if (hit !== undefined) return { kind: "finish", reason: "stop", stopReason: hit, stopToken: false };
    }
    if (promptLen + out.length >= maxModelLen || out.length >= maxTokens)
      return { kind: "finish", reason: "length", stopReason: null, stopToken: false };
    if ((pl.repetition && hasRepetition(out, pl.repetition)) || repAt === out.length)
      return { kind: "finish", reason: "repetition", stopReason: "repetition_detected", stopToken: false };
    return null;
  };
  const sampled = [...tokens];
  for (;;) {
    if (abortAt === out.length) return { ids: out, end: { kind: "abort" } };
    if (errorAt === out.length) return { ids: out, end: { kind: "error" } };
    let next = sampled.shift();
    if (next === undefined) {
      // the script ran out: the model samples EOS
      if (pl.eos === null) return { ids: out, end: { kind: "finish", reason: "length", stopReason: null, stopToken: false } };
      next = pl.eos;
    }
    out.push(next);
    const end = check();
    if (end) return { ids: out, end };
  }
}

// ------------------------------------------------------------------ output

interface Piece {
  choice: number;
  ids: number[];
  /** Set on the choice's last piece. */
  end: Terminal | null;
}

/** output_processor make_request_output: the first id alone, then every `interval` ids, the rest with the finish. */
function pieces(run: Run, choice: number, interval: number, sizes: number[] | undefined): Piece[] {
  const out: Piece[] = [];
  const { ids, end } = run;
  const finishes = end.kind === "finish";
  if (sizes && sizes.length) {
    let at = 0;
    let k = 0;
    while (at < ids.length) {
      const size = Math.max(1, sizes[Math.min(k++, sizes.length - 1)]!);
      const next = Math.min(ids.length, at + size);
      out.push({ choice, ids: ids.slice(at, next), end: finishes && next === ids.length ? end : null });
      at = next;
    }
    if (!finishes) out.push({ choice, ids: [], end });
    return out;
  }
  let offset = 0;
  for (let step = 1; step <= ids.length; step++) {
    const last = step === ids.length;
    if (last && finishes) {
      out.push({ choice, ids: ids.slice(offset, step), end });
      offset = step;
    } else if (offset === 0 || step - offset >= interval) {
      out.push({ choice, ids: ids.slice(offset, step), end: null });
      offset = step;
    }
  }
  // an abort's last output carries the ids held back by the interval; an error's raises first
  if (!finishes) out.push({ choice, ids: end.kind === "abort" ? ids.slice(offset) : [], end });
  return out;
}

/** Round-robin: the n choices advance together, one chunk each per step. */
function interleave(lists: Piece[][]): Piece[] {
  const out: Piece[] = [];
  for (let k = 0; lists.some((l) => k < l.length); k++) for (const l of lists) if (k < l.length) out.push(l[k]!);
  return out;
}

function textOf(ids: readonly number[], dropLast: boolean, skipSpecial: boolean, decode: (id: number) => string): string {
  const keep = dropLast ? ids.slice(0, -1) : ids;
  return keep
    .filter((id) => !(skipSpecial && id >= FIRST_SPECIAL))
    .map(decode)
    .join("");
}

function usageWith(prompt: number, completion: number, details: number | null): Obj {
  const u = usageOf(prompt, completion);
  if (details !== null) u.prompt_tokens_details = { cached_tokens: details };
  return u;
}

// ------------------------------------------------------------------ server

export function defaultDecode(id: number): string {
  return SPECIAL_TEXT[id] ?? (id >= FIRST_SPECIAL ? `<|reserved_${id}|>` : `[${id}]`);
}

/** One id per UTF-8 byte: a placeholder tokenizer. */
export function defaultTokenize(text: string): number[] {
  return Array.from(Buffer.from(text, "utf8"));
}

const SSE_HEADERS = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" };

export async function startVllm(initial: Partial<VllmConfig> = {}): Promise<VllmStandIn> {
  const config: VllmConfig = { ...GPT_OSS_20B, decode: defaultDecode, tokenize: defaultTokenize, ...initial } as VllmConfig;
  let scripts: Script[] = [{}];
  let responder: ((body: Obj) => Script) | null = null;
  const received: Received[] = [];
  const started = Math.floor(Date.now() / 1000);
  const metrics = { running: 0, success: new Map<string, number>(), promptTokens: 0, generationTokens: 0 };

  function json(res: http.ServerResponse, rec: Received, status: number, body: unknown): void {
    rec.status = status;
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const rawBody = Buffer.concat(chunks).toString("utf8");
      let body: Obj | undefined;
      try {
        const v: unknown = rawBody ? JSON.parse(rawBody) : undefined;
        body = v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : undefined;
      } catch {
        body = undefined;
      }
      const rec: Received = {
        method: req.method ?? "",
        path: url.pathname,
        headers: req.headers,
        body,
        rawBody,
        aborted: false,
        status: 0,
        events: [],
      };
      received.push(rec);
      res.on("close", () => {
        if (!res.writableFinished) rec.aborted = true;
      });
      route(req, res, rec, url.pathname).catch((e: Error) => {
        if (!res.headersSent) json(res, rec, 500, { error: { message: e.message, type: "InternalServerError", param: null, code: 500 } });
        else res.destroy();
      });
    });
  });

  async function route(req: http.IncomingMessage, res: http.ServerResponse, rec: Received, path: string): Promise<void> {
    const method = req.method ?? "GET";
    // authenticate.py: the guarded prefixes need the key; the rest stays open
    if (config.apiKey !== null && /^\/(v1|v2|inference|cohere)(\/|$)/.test(path) && req.headers.authorization !== `Bearer ${config.apiKey}`)
      return json(res, rec, 401, { error: "Unauthorized" });
    const allowed = VLLM_ROUTES[path];
    if (!allowed) return json(res, rec, 404, { detail: "Not Found" });
    if (!allowed.includes(method === "HEAD" ? "GET" : method)) return json(res, rec, 405, { detail: "Method Not Allowed" });
    const p = config.profile;
    switch (path) {
      case "/health":
      case "/ping":
        rec.status = config.healthy ? 200 : 503;
        res.writeHead(rec.status, { "content-length": 0 });
        res.end();
        return;
      case "/version":
        return json(res, rec, 200, { version: config.version });
      case "/metrics":
        return metricsText(res, rec);
      case "/v1/models":
        return json(res, rec, 200, modelList(config.servedModelName, config.modelRoot, config.maxModelLen, started));
      case "/tokenize":
      case "/detokenize":
        return tokenize(res, rec, path);
      case "/v1/completions":
        break;
    }
    const s = responder && rec.body ? responder(rec.body) : scripts.length > 1 ? scripts.shift()! : scripts[0]!;
    const cfg: VllmConfig = { ...config, ...(s.config ?? {}) };
    if (s.status) {
      rec.status = s.status;
      const text =
        typeof s.errorBody === "string"
          ? s.errorBody
          : JSON.stringify(s.errorBody ?? errorBody(cfg.profile, new HttpFail(s.status, `scripted ${s.status}`)));
      res.writeHead(s.status, { "content-type": "application/json" });
      res.end(text);
      return;
    }
    // validate_json_request (api_utils.py); the envelope is assumed
    const ctype = String(req.headers["content-type"] ?? "")
      .split(";")[0]!
      .trim()
      .toLowerCase();
    if (ctype !== "application/json")
      return json(res, rec, 400, errorBody(p, new HttpFail(400, "Unsupported Media Type: Only 'application/json' is allowed")));
    if (!rec.body) return json(res, rec, 400, errorBody(p, new HttpFail(400, "the request body must be a JSON object")));
    let pl: Plan;
    try {
      pl = plan(rec.body, cfg);
    } catch (e) {
      if (e instanceof HttpFail) return json(res, rec, e.status, errorBody(cfg.profile, e));
      throw e;
    }
    const perChoice = (i: number): number[] => {
      const t = s.tokens ?? [];
      return Array.isArray(t[0]) ? ((t as number[][])[i] ?? []) : (t as number[]);
    };
    // choice index = output.index + prompt_idx * n
    const runs: { run: Run; prompt: number }[] = [];
    pl.prompts.forEach((ids, pi) => {
      for (let c = 0; c < pl.n; c++) {
        const i = pi * pl.n + c;
        runs.push({ run: runChoice(perChoice(i), s, i, pl, ids.length, cfg.maxModelLen, pl.maxTokens[pi]!, cfg.decode), prompt: pi });
      }
    });
    metrics.running++;
    try {
      if (pl.stream) await stream(res, rec, s, cfg, pl, runs);
      else complete(res, rec, cfg, pl, runs);
    } finally {
      metrics.running--;
    }
  }

  function tokenize(res: http.ServerResponse, rec: Received, path: string): void {
    const b = rec.body ?? {};
    if (path === "/detokenize") {
      if (!isIntList(b.tokens))
        return json(res, rec, 400, errorBody(config.profile, new HttpFail(400, "tokens must be a list of token ids")));
      return json(res, rec, 200, { prompt: b.tokens.map(config.decode).join("") });
    }
    let text: string;
    if (typeof b.prompt === "string") text = b.prompt;
    else if (Array.isArray(b.messages)) text = (b.messages as Obj[]).map((m) => (typeof m.content === "string" ? m.content : "")).join("");
    else return json(res, rec, 400, errorBody(config.profile, new HttpFail(400, "prompt or messages must be provided")));
    const tokens = config.tokenize(text);
    const out: Obj = { count: tokens.length, max_model_len: config.maxModelLen, tokens };
    if (config.profile === "current") out.token_strs = b.return_token_strs === true ? tokens.map(config.decode) : null;
    json(res, rec, 200, out);
  }

  function metricsText(res: http.ServerResponse, rec: Received): void {
    const labels = `engine="0",model_name="${config.servedModelName}"`;
    const f = (v: number) => (Number.isInteger(v) ? `${v}.0` : String(v));
    const lines = [
      "# HELP vllm:num_requests_running Number of requests in model execution batches.",
      "# TYPE vllm:num_requests_running gauge",
      `vllm:num_requests_running{${labels}} ${f(metrics.running)}`,
      "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
      "# TYPE vllm:num_requests_waiting gauge",
      `vllm:num_requests_waiting{${labels}} ${f(config.numRequestsWaiting)}`,
      "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
      "# TYPE vllm:kv_cache_usage_perc gauge",
      `vllm:kv_cache_usage_perc{${labels}} ${f(config.kvCacheUsage)}`,
      "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
      "# TYPE vllm:prompt_tokens_total counter",
      `vllm:prompt_tokens_total{${labels}} ${f(metrics.promptTokens)}`,
      "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
      "# TYPE vllm:generation_tokens_total counter",
      `vllm:generation_tokens_total{${labels}} ${f(metrics.generationTokens)}`,
      "# HELP vllm:request_success_total Count of successfully processed requests.",
      "# TYPE vllm:request_success_total counter",
      ...["stop", "length", "abort", "error", "repetition"].map(
        (r) =>
          `vllm:request_success_total{engine="0",finished_reason="${r}",model_name="${config.servedModelName}"} ${f(metrics.success.get(r) ?? 0)}`,
      ),
    ];
    const text = lines.join("\n") + "\n";
    rec.status = 200;
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8", "content-length": Buffer.byteLength(text) });
    res.end(text);
  }

  function count(pl: Plan, runs: { run: Run }[]): void {
    metrics.promptTokens += pl.prompts.reduce((a, p) => a + p.length, 0);
    for (const { run } of runs) {
      metrics.generationTokens += run.ids.length;
      const r = run.end.kind === "finish" ? run.end.reason : run.end.kind;
      metrics.success.set(r, (metrics.success.get(r) ?? 0) + 1);
    }
  }

  /** completion_stream_generator. */
  async function stream(
    res: http.ServerResponse,
    rec: Received,
    s: Script,
    cfg: VllmConfig,
    pl: Plan,
    runs: { run: Run; prompt: number }[],
  ): Promise<void> {
    const p = pl.profile;
    const id = `cmpl-${randomId()}`;
    const created = Math.floor(Date.now() / 1000);
    rec.status = 200;
    res.writeHead(200, SSE_HEADERS);
    if (s.hang) return;
    count(pl, runs);
    const send = (data: unknown): boolean => {
      if (res.destroyed) return false;
      rec.events.push(data);
      res.write(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
      return true;
    };
    const done = () => {
      if (!res.destroyed) {
        rec.events.push("[DONE]");
        res.end("data: [DONE]\n\n");
      }
    };
    const order = interleave(runs.map(({ run }, i) => pieces(run, i, pl.interval, s.chunkSizes)));
    const sentIds = runs.map(() => 0);
    const sentText = runs.map(() => 0);
    const prompted = runs.map(() => false);
    let chunksSent = 0;
    for (const piece of order) {
      const i = piece.choice;
      const { prompt } = runs[i]!;
      const promptIds = pl.prompts[prompt]!;
      if (s.breakAfterChunks !== undefined && chunksSent >= s.breakAfterChunks) {
        res.socket?.destroy();
        return;
      }
      if (s.midStreamError && chunksSent >= s.midStreamError.afterChunks) {
        const m = s.midStreamError;
        // `except Exception`: create_streaming_error_response(e) — a 500 now, a 400 (str(e)) in the older generators
        const code = m.code ?? (p === "current" ? 500 : 400);
        send(streamError(p, m.message ?? "scripted error", m.type ?? (code >= 500 ? "InternalServerError" : "BadRequestError"), code));
        return done();
      }
      const end = piece.end;
      if (end?.kind === "error") {
        // _raise_if_error -> GenerationError -> _convert_generation_error_to_streaming_response
        send(streamError(p, "Internal server error", "InternalServerError", 500));
        return done();
      }
      if (end?.kind === "abort" && p !== "current") {
        // serving_completion.py @00463e62: `if finish_reason == "abort": raise ValueError(output.stop_reason)`
        send(streamError(p, "None", "BadRequestError", 400));
        return done();
      }
      const finish = end ? (end.kind === "finish" ? end.reason : "abort") : null;
      const stopReason = end && end.kind === "finish" ? end.stopReason : null;
      const dropStop = !!end && end.kind === "finish" && end.stopToken && !pl.includeStop;
      const text = textOf(piece.ids, dropStop, pl.skipSpecial, cfg.decode);
      // "Chunked prefill case, don't return empty chunks" (and prompt ids are consumed all the same)
      const firstForChoice = !prompted[i];
      prompted[i] = true;
      if (!text && piece.ids.length === 0 && sentIds[i] === 0) continue;
      const choice: Obj = {
        index: i,
        text,
        logprobs: logprobsOf(piece.ids, pl, cfg.decode, sentText[i]!),
        finish_reason: finish,
        stop_reason: stopReason,
      };
      if (p !== "v0.10.0") {
        // current: prompt ids only with return_token_ids; v0.10.2 sent them regardless (fixed by PR #27561)
        choice.prompt_token_ids = firstForChoice && (pl.returnTokenIds || p === "v0.10.2") ? promptIds : null;
        choice.token_ids = pl.returnTokenIds ? piece.ids : null;
      }
      sentIds[i] = sentIds[i]! + piece.ids.length;
      sentText[i] = sentText[i]! + text.length;
      const chunk: Obj = { id, object: "text_completion", created, model: pl.model, choices: [choice] };
      if (pl.continuousUsage) chunk.usage = usageWith(promptIds.length, sentIds[i]!, null);
      else if (p !== "current") chunk.usage = null; // exclude_unset=False
      if (!send(chunk)) return;
      chunksSent++;
      if (s.delayMs) await new Promise((r) => setTimeout(r, s.delayMs));
    }
    if (pl.includeUsage) {
      const promptTokens = pl.prompts.reduce((a, ids) => a + ids.length, 0);
      const completion = sentIds.reduce((a, b) => a + b, 0);
      const details = cfg.enablePromptTokensDetails && (p === "current" || cfg.cachedTokens) ? cfg.cachedTokens : null;
      send({ id, object: "text_completion", created, model: pl.model, choices: [], usage: usageWith(promptTokens, completion, details) });
    }
    done();
  }

  /** request_output_to_completion_response (JSON, every field dumped). */
  function complete(res: http.ServerResponse, rec: Received, cfg: VllmConfig, pl: Plan, runs: { run: Run; prompt: number }[]): void {
    const p = pl.profile;
    count(pl, runs);
    const choices: Obj[] = [];
    let completion = 0;
    for (const [i, { run, prompt }] of runs.entries()) {
      if (run.end.kind === "error")
        return json(res, rec, 500, errorBody(p, new HttpFail(500, "Internal server error", "InternalServerError")));
      if (run.end.kind === "abort" && p !== "current") return json(res, rec, 400, errorBody(p, new HttpFail(400, "None")));
      const end = run.end;
      const dropStop = end.kind === "finish" && end.stopToken && !pl.includeStop;
      const c: Obj = {
        index: i,
        text: textOf(run.ids, dropStop, pl.skipSpecial, cfg.decode),
        logprobs: logprobsOf(run.ids, pl, cfg.decode, 0),
        finish_reason: end.kind === "finish" ? end.reason : "abort",
        stop_reason: end.kind === "finish" ? end.stopReason : null,
      };
      if (p !== "v0.10.0") c.token_ids = pl.returnTokenIds ? run.ids : null;
      c.prompt_logprobs = null;
      if (p !== "v0.10.0") c.prompt_token_ids = pl.returnTokenIds ? pl.prompts[prompt] : null;
      choices.push(c);
      completion += run.ids.length;
    }
    const promptTokens = pl.prompts.reduce((a, ids) => a + ids.length, 0);
    const usage = usageWith(promptTokens, completion, cfg.enablePromptTokensDetails ? cfg.cachedTokens : null);
    if (!("prompt_tokens_details" in usage)) usage.prompt_tokens_details = null;
    const body: Obj = {
      id: `cmpl-${randomId()}`,
      object: "text_completion",
      created: Math.floor(Date.now() / 1000),
      model: pl.model,
      choices,
      service_tier: null,
      system_fingerprint: null,
      usage,
      kv_transfer_params: null,
    };
    json(res, rec, 200, body);
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    config,
    received,
    completions: () => received.filter((r) => r.path === "/v1/completions"),
    script: (...s) => {
      scripts = s.length ? s : [{}];
      responder = null;
    },
    respond: (fn) => {
      responder = fn;
    },
    set: (c) => {
      Object.assign(config, c);
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
