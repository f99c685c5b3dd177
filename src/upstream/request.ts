/**
 * The one place every engine request is built: each engine's rules are a row
 * of {@link ENGINE_RULES} (the endpoint, the fields always sent, the
 * sampling fields by the engine's own names, the token limit and how it is
 * filled, how many choices one request may ask, what is read for health,
 * metrics and version), and {@link engineRequest} applies a row to a
 * generation. No engine module builds a body of its own.
 *
 * What every row shares:
 * - a `null` is never sent: OpenAI reads a null sampling field as its
 *   default, and so does the sidecar (src/openai/sampling.ts), but SGLang's
 *   and trtllm-serve's request models refuse nulls for the fields in
 *   `refusesNull` (a 400 for a request OpenAI accepts), so a null is left
 *   out and the engine's default applies;
 * - `stop` (strings) is never sent: engines apply stop strings to the text
 *   of the whole completion, reasoning included, so the sidecar applies them
 *   to the answer itself (src/openai/stop.ts);
 * - the token limit sent is also the one each choice is cut at when the
 *   engine goes past it (src/upstream/read.ts).
 */
import { HARMONY } from "../core/preset.js";
import { logprobsRefused, stopIds, UpstreamError, type CompletionRequest, type ConcreteEngineKind } from "./engine.js";

export interface EngineRules {
  kind: ConcreteEngineKind;
  /** How the engine is named in messages. */
  name: string;
  /** The streaming generation endpoint. */
  endpoint: string;
  /** Whether its stream ends with `data: [DONE]`. */
  doneMarker: boolean;
  /** Fields sent as they are on every request. */
  fixed: Readonly<Record<string, unknown>>;
  /** The field Harmony's stop ids go in; null when the engine takes none. */
  stopIdsField: string | null;
  /** The 400 when a request needs stop ids beyond Harmony's and the engine takes none. */
  noStopIds: string | null;
  /** The OpenAI sampling fields the engine takes, by its name for each. */
  sampling: Readonly<Record<string, string>>;
  /** The sampling fields the engine refuses as `null` (documentation and tests: no null is ever sent). */
  refusesNull: readonly string[];
  /**
   * The token limit's field, and what is sent without a client value: the
   * context the prompt leaves (`context`), one less (`context-1`: the engine
   * refuses prompt + limit = context), or nothing (`engine`: it fills the
   * context itself).
   */
  limit: { field: string; fill: "context" | "context-1" | "engine" };
  /** A client limit beyond the context: refused before the engine (true), or passed (the engine lowers it). */
  refuseOverContext: boolean;
  /** How many choices one request may ask (field `n`), and why it is one when it is. */
  choices: { max: number; why: string | null };
  /** `model`: the client's when served else the first served, always the first served (a required field), or none. */
  model: "served-or-client" | "served-or-default" | "first-served" | "none";
  /** Whether token log probabilities can be asked. */
  logprobs: boolean;
  /** The health check (200 when it can serve). */
  healthPath: string;
  /** Prometheus text. */
  metricsPath: string;
  /** Where the engine says its version (`field` of a JSON object), or null. */
  version: { path: string; field: string } | null;
  /** The first version that gives ids, when it is known as a number (checked at start-up), and what needs it. */
  floor: { version: string; needs: string } | null;
  /** The 502 when the stream carries no ids. */
  noIds: string;
}

/** The sampling fields of OpenAI's API that vLLM, SGLang and trtllm-serve take under the same names. */
const OPENAI_NAMES: Readonly<Record<string, string>> = Object.freeze({
  temperature: "temperature",
  top_p: "top_p",
  top_k: "top_k",
  min_p: "min_p",
  seed: "seed",
  presence_penalty: "presence_penalty",
  frequency_penalty: "frequency_penalty",
  repetition_penalty: "repetition_penalty",
  logit_bias: "logit_bias",
  user: "user",
});

/** Harmony's named specials as text: llama-server writes a special's text into `content` only for these (`preserved_tokens`). */
export const HARMONY_SPECIAL_NAMES: readonly string[] = Object.freeze(Object.keys(HARMONY.specials));

export const ENGINE_RULES: Readonly<Record<ConcreteEngineKind, EngineRules>> = Object.freeze({
  vllm: {
    kind: "vllm",
    name: "vLLM",
    endpoint: "/v1/completions",
    doneMarker: true,
    fixed: { stream: true, stream_options: { include_usage: true }, return_token_ids: true, skip_special_tokens: false },
    stopIdsField: "stop_token_ids",
    noStopIds: null,
    sampling: OPENAI_NAMES,
    // CompletionRequest: every sampling field is `X | None`; only `n: int = 1` (always sent) is not
    refusesNull: [],
    limit: { field: "max_tokens", fill: "context" },
    refuseOverContext: true,
    choices: { max: 16, why: null },
    model: "served-or-client",
    logprobs: true,
    healthPath: "/health",
    metricsPath: "/metrics",
    version: { path: "/version", field: "version" },
    floor: { version: "0.10.2", needs: "return_token_ids (PR #22587)" },
    noIds: "upstream does not return token ids; vLLM ≥ 0.10.2 needed (return_token_ids)",
  },
  sglang: {
    kind: "sglang",
    name: "SGLang",
    endpoint: "/v1/completions",
    doneMarker: true,
    fixed: { stream: true, stream_options: { include_usage: true }, return_token_ids: true, skip_special_tokens: false },
    stopIdsField: "stop_token_ids",
    noStopIds: null,
    sampling: OPENAI_NAMES,
    // CompletionRequest (protocol.py): float/int fields with defaults, not Optional
    refusesNull: ["temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty"],
    limit: { field: "max_tokens", fill: "context-1" },
    refuseOverContext: true,
    choices: { max: 16, why: null },
    model: "served-or-default",
    logprobs: false,
    healthPath: "/health",
    metricsPath: "/metrics",
    version: null,
    floor: null,
    noIds: "upstream does not return token ids; an SGLang with return_token_ids on /v1/completions is needed",
  },
  trtllm: {
    kind: "trtllm",
    name: "trtllm-serve",
    endpoint: "/v1/completions",
    doneMarker: true,
    fixed: {
      stream: true,
      stream_options: { include_usage: true },
      detokenize: false,
      skip_special_tokens: false,
      // keep the stop id in token_ids, as the other engines do: the parser sees <|call|> / <|return|>
      include_stop_str_in_output: true,
    },
    stopIdsField: "stop_token_ids",
    noStopIds: null,
    sampling: OPENAI_NAMES,
    // CompletionRequest (openai_protocol.py): `top_k: int = 0`, `min_p: float = 0.0`, `repetition_penalty: float = 1.0`
    refusesNull: ["top_k", "min_p", "repetition_penalty"],
    limit: { field: "max_tokens", fill: "engine" },
    refuseOverContext: false,
    choices: {
      max: 1,
      why: "n must be 1 with trtllm-serve: its streamed /v1/completions sends every choice on every step, the ones that did not move with their last ids again (postprocess_handlers.py), so their ids cannot be told apart",
    },
    model: "first-served",
    logprobs: false,
    healthPath: "/health",
    // /metrics is a JSON list of iteration stats; Prometheus text is mounted here (with return_perf_metrics)
    metricsPath: "/prometheus/metrics",
    version: { path: "/version", field: "version" },
    floor: null,
    noIds: "upstream does not return token ids; a trtllm-serve whose /v1/completions takes detokenize: false is needed",
  },
  llamacpp: {
    kind: "llamacpp",
    name: "llama-server",
    endpoint: "/completion",
    doneMarker: false,
    fixed: { stream: true, return_tokens: true, preserved_tokens: HARMONY_SPECIAL_NAMES },
    stopIdsField: null,
    noStopIds:
      "llama-server's /completion takes no stop token ids, which tool_choice \"required\" or a named function needs (the call is put into the prompt after the model's reasoning): not supported with --upstream-kind llamacpp",
    sampling: {
      temperature: "temperature",
      top_p: "top_p",
      top_k: "top_k",
      min_p: "min_p",
      seed: "seed",
      presence_penalty: "presence_penalty",
      frequency_penalty: "frequency_penalty",
      repetition_penalty: "repeat_penalty",
      logit_bias: "logit_bias",
    },
    // json_value: a null falls back to the default
    refusesNull: [],
    limit: { field: "n_predict", fill: "context" },
    refuseOverContext: true,
    choices: { max: 1, why: "n must be 1 with a llama.cpp upstream: its /completion makes one completion per request" },
    model: "none",
    logprobs: false,
    healthPath: "/health",
    metricsPath: "/metrics",
    version: { path: "/props", field: "build_info" },
    floor: null,
    noIds: "upstream does not return token ids; a llama-server whose /completion takes return_tokens is needed",
  },
});

/** What the engine serves, as far as the request needs it: the names (`/v1/models`) and the context length. */
export interface Served {
  ids: string[];
  /** Tokens of context per sequence (vLLM and SGLang `max_model_len`, llama-server's slot `n_ctx`), or null. */
  context: number | null;
}

/** A request for one generation, and the token limit each of its choices is cut at (null: none sent). */
export interface EngineRequest {
  path: string;
  body: Record<string, unknown>;
  limit: number | null;
}

function tooLong(r: CompletionRequest, context: number, asked?: number): UpstreamError {
  const more = asked === undefined ? "" : ` and ${asked} more were asked for`;
  return new UpstreamError(
    400,
    "context_length_exceeded",
    `the prompt has ${r.prompt.length} tokens${more}; the model's context is ${context} tokens`,
  );
}

function modelFor(rules: EngineRules, r: CompletionRequest, served: Served | null): unknown {
  const asked = r.client.model;
  const ids = served?.ids ?? [];
  switch (rules.model) {
    case "none":
      return undefined;
    case "first-served":
      return ids.length > 0 ? ids[0] : typeof asked === "string" ? asked : "gpt-oss";
    case "served-or-client":
    case "served-or-default": {
      const model = ids.length > 0 && !(typeof asked === "string" && ids.includes(asked)) ? ids[0] : asked;
      if (rules.model === "served-or-default") return typeof model === "string" ? model : "default";
      return model;
    }
  }
}

/** Apply `rules` to one generation: the body to POST, or an {@link UpstreamError} (400) for what the engine cannot do. */
export function engineRequest(rules: EngineRules, r: CompletionRequest, served: Served | null): EngineRequest {
  if (r.logprobs !== undefined && !rules.logprobs) throw logprobsRefused(rules.kind);
  if (r.n > rules.choices.max) {
    throw new UpstreamError(400, "upstream_error", rules.choices.why ?? `n must be at most ${rules.choices.max} with ${rules.name}`);
  }
  if (r.stopIds && r.stopIds.length > 0 && rules.stopIdsField === null) {
    throw new UpstreamError(400, "upstream_error", rules.noStopIds ?? `${rules.name} takes no stop token ids`);
  }
  const body: Record<string, unknown> = {};
  const model = modelFor(rules, r, served);
  if (model !== undefined) body.model = model;
  body.prompt = r.prompt;
  for (const [k, v] of Object.entries(rules.fixed)) body[k] = v;
  if (rules.stopIdsField !== null) body[rules.stopIdsField] = stopIds(r);
  if (rules.choices.max > 1) body.n = r.n;

  const context = served?.context ?? null;
  const room = context === null ? null : context - r.prompt.length - (rules.limit.fill === "context-1" ? 1 : 0);
  let limit: number | null = null;
  if (rules.refuseOverContext && room !== null && room < 1) throw tooLong(r, context!);
  if (typeof r.maxTokens === "number") {
    if (rules.refuseOverContext && room !== null && r.maxTokens > room) throw tooLong(r, context!, r.maxTokens);
    limit = r.maxTokens;
  } else if (rules.limit.fill !== "engine" && room !== null) limit = room;
  if (limit !== null) body[rules.limit.field] = limit;

  for (const [from, to] of Object.entries(rules.sampling)) {
    const v = r.client[from];
    if (v !== undefined && v !== null) body[to] = v;
  }
  if (r.logprobs !== undefined) {
    // top-k per token, named by id ("token_id:N"), not by text that may be a partial character
    body.logprobs = r.logprobs;
    body.return_tokens_as_token_ids = true;
  }
  return { path: rules.endpoint, body, limit };
}
