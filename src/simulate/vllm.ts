/**
 * vLLM's contract for `POST /v1/completions`, as the simulator keeps it:
 * the request's validation and its 400s, `get_max_tokens`, the stop checks
 * (requested stop ids, the generation config's EOS ids, the tokenizer EOS,
 * max_tokens and the context, min_tokens, repetition detection), finish and
 * stop reasons, text without the stop token, logprobs, usage.
 *
 * Written from the same vLLM source as the project's faithful stand-in
 * (test/e2e/stand-ins/vllm.ts, whose header cites each file and commit;
 * docs/vllm-contract.md): `entrypoints/openai/completion/protocol.py`,
 * `completion/serving.py`, `serve/utils/api_utils.py` (`get_max_tokens`),
 * `renderers/params.py` (`_token_len_check`), `exceptions.py`,
 * `sampling_params.py` (`update_from_generation_config`, `_verify_args`),
 * `v1/core/sched/utils.py` (`check_stop`, `check_sequence_repetition`),
 * `v1/engine/detokenizer.py`, `v1/engine/output_processor.py`. Only the
 * current wire is modelled (the stand-in's profile `current`).
 */

import { TextDecoder } from "node:util";
import { HARMONY } from "../core/preset.js";

type Obj = Record<string, unknown>;

/** gpt-oss's tokenizer EOS, `<|return|>`: stops with `stop_reason: null`. */
export const TOKENIZER_EOS = HARMONY.tokens.return;
/** gpt-oss generation_config.json `eos_token_id` (`<|return|>`, `<|endoftext|>`, `<|call|>`): the ids other than the tokenizer's join every request's stop ids. */
export const GENERATION_CONFIG_EOS = [HARMONY.tokens.return, HARMONY.specials["<|endoftext|>"]!, HARMONY.tokens.call];

/** The largest `repetition_detection` pattern size and count the simulator checks (more is read as this). */
export const MAX_REPETITION = 64;

export class HttpFail {
  constructor(
    readonly status: number,
    readonly message: string,
    readonly type: string = "BadRequestError",
    readonly param: string | null = null,
  ) {}
}

/** vLLM's error body (nested since v0.10.1). */
export function errorBody(f: HttpFail): Obj {
  return { error: { message: f.message, type: f.type, param: f.param, code: f.status } };
}

/** VLLMValidationError.__str__ (vllm/exceptions.py). */
export function validationMessage(message: string, parameter?: string, value?: unknown): string {
  const extras: string[] = [];
  if (parameter !== undefined) extras.push(`parameter=${parameter}`);
  if (value !== undefined && value !== null) extras.push(`value=${String(value)}`);
  return extras.length ? `${message} (${extras.join(", ")})` : message;
}

/** The paths of vLLM's OpenAI server the sidecar and its tests use, and the methods each takes (FastAPI: 404 elsewhere, 405 for another method). */
export const VLLM_ROUTES: Readonly<Record<string, readonly string[]>> = Object.freeze({
  "/health": ["GET"],
  "/ping": ["GET", "POST"],
  "/version": ["GET"],
  "/metrics": ["GET"],
  "/v1/models": ["GET"],
  "/tokenize": ["POST"],
  "/detokenize": ["POST"],
  "/v1/completions": ["POST"],
});

/** vLLM's random_uuid: 32 hex digits, for answer ids. */
export function randomId(): string {
  let s = "";
  for (let i = 0; i < 32; i++) s += Math.floor(Math.random() * 16).toString(16);
  return s;
}

/** `GET /v1/models`: vLLM's ModelList of one ModelCard (engine/protocol.py), with its one permission. */
export function modelList(id: string, root: string, maxModelLen: number, created: number): Obj {
  return {
    object: "list",
    data: [
      {
        id,
        object: "model",
        created,
        owned_by: "vllm",
        root,
        parent: null,
        max_model_len: maxModelLen,
        permission: [
          {
            id: `modelperm-${randomId()}`,
            object: "model_permission",
            created,
            allow_create_engine: false,
            allow_sampling: true,
            allow_logprobs: true,
            allow_search_indices: false,
            allow_view: true,
            allow_fine_tuning: false,
            organization: "*",
            group: null,
            is_blocking: false,
          },
        ],
      },
    ],
  };
}

export interface ServedModel {
  servedModelName: string;
  maxModelLen: number;
  /** generation_config `max_new_tokens`, or null. */
  maxNewTokens: number | null;
  /** `--stream-interval`. */
  streamInterval: number;
}

export interface Repetition {
  min_pattern_size: number;
  max_pattern_size: number;
  min_count: number;
}

/** A validated `/v1/completions` request. */
export interface Plan {
  prompts: number[][];
  n: number;
  stream: boolean;
  /** Per prompt: `get_max_tokens`. */
  maxTokens: number[];
  minTokens: number;
  eos: number | null;
  stopIds: number[];
  includeStop: boolean;
  skipSpecial: boolean;
  returnTokenIds: boolean;
  logprobs: number | null;
  asTokenIds: boolean;
  includeUsage: boolean;
  continuousUsage: boolean;
  interval: number;
  repetition: Repetition | null;
  /** For prompts given as text (the simulator tokenizes them). */
  ignoreEos: boolean;
}

export function isIntList(v: unknown): v is number[] {
  return Array.isArray(v) && v.every((x) => Number.isInteger(x) && (x as number) >= 0);
}

/**
 * CompletionRequest's validators, the renderer's length checks and
 * SamplingParams' checks; throws {@link HttpFail} as vLLM answers them.
 */
export function plan(body: Obj, m: ServedModel, tokenize: (text: string) => number[]): Plan {
  const maxTokens = body.max_tokens === undefined || body.max_tokens === null ? 16 : body.max_tokens;
  if (typeof maxTokens !== "number" || !Number.isInteger(maxTokens))
    throw new HttpFail(400, "max_tokens must be an integer", "BadRequestError", "max_tokens");
  if (body.stream_options && !body.stream)
    throw new HttpFail(
      400,
      validationMessage("Stream options can only be defined when `stream=True`.", "stream_options"),
      "BadRequestError",
      "stream_options",
    );
  const prompt = body.prompt;
  let prompts: number[][];
  if (isIntList(prompt) && prompt.length > 0) prompts = [prompt];
  else if (Array.isArray(prompt) && prompt.length > 0 && prompt.every(isIntList) && prompt.every((p) => p.length > 0)) prompts = prompt;
  else if (typeof prompt === "string" && prompt !== "") prompts = [tokenize(prompt)];
  else if (Array.isArray(prompt) && prompt.length > 0 && prompt.every((x) => typeof x === "string" && x !== ""))
    prompts = (prompt as string[]).map(tokenize);
  else
    throw new HttpFail(
      400,
      validationMessage("Either prompt or prompt_embeds must be provided and non-empty.", "prompt"),
      "BadRequestError",
      "prompt",
    );
  if (typeof body.model === "string" && body.model !== m.servedModelName)
    throw new HttpFail(404, `The model \`${body.model}\` does not exist.`, "NotFoundError");
  const L = m.maxModelLen;
  if (maxTokens > L)
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
  if (n > 128) throw new HttpFail(400, `n must be at most 128 in the simulator, got ${n}.`, "BadRequestError", "n");
  const temperature = typeof body.temperature === "number" ? body.temperature : 1.0;
  if (temperature < 1e-5 && n > 1) throw new HttpFail(400, `n must be 1 when using greedy sampling, got ${n}.`);
  const ignoreEos = body.ignore_eos === true;
  // to_sampling_params: the request's stop ids; update_from_generation_config adds the other EOS ids
  let stopIds = [...new Set(isIntList(body.stop_token_ids) ? body.stop_token_ids : [])];
  const extraEos = new Set(GENERATION_CONFIG_EOS);
  extraEos.delete(TOKENIZER_EOS);
  if (!ignoreEos) stopIds = [...new Set([...extraEos, ...stopIds])];
  const so = body.stream_options as Obj | null | undefined;
  const includeUsage = !!so && so.include_usage !== false && so.include_usage !== null;
  const continuousUsage = includeUsage && so?.continuous_usage_stats === true;
  const rd = body.repetition_detection as Obj | null | undefined;
  const requestInterval = typeof body.stream_interval === "number" && Number.isInteger(body.stream_interval) ? body.stream_interval : 1;
  return {
    prompts,
    n,
    stream: body.stream === true,
    maxTokens: prompts.map((ids) => Math.min(L - ids.length, maxTokens, m.maxNewTokens ?? Infinity)),
    minTokens: typeof body.min_tokens === "number" ? body.min_tokens : 0,
    eos: ignoreEos ? null : TOKENIZER_EOS,
    stopIds,
    includeStop: body.include_stop_str_in_output === true,
    skipSpecial: body.skip_special_tokens !== false,
    returnTokenIds: body.return_token_ids === true,
    logprobs: typeof body.logprobs === "number" ? Math.min(20, Math.max(0, Math.floor(body.logprobs))) : null,
    asTokenIds: body.return_tokens_as_token_ids === true,
    includeUsage,
    continuousUsage,
    interval: Math.max(1, m.streamInterval, Math.min(requestInterval, 1 << 20)),
    repetition:
      rd && typeof rd === "object"
        ? {
            min_pattern_size: Number(rd.min_pattern_size ?? 0),
            // bounded: the check runs for every sampled id, on the simulator's one thread
            max_pattern_size: Math.min(Number(rd.max_pattern_size ?? 0), MAX_REPETITION),
            min_count: Math.min(Number(rd.min_count ?? 0), MAX_REPETITION),
          }
        : null,
    ignoreEos,
  };
}

/** sched/utils.py check_sequence_repetition (without the absolute size guards). */
export function hasRepetition(ids: readonly number[], r: Repetition): boolean {
  const minSize = r.min_pattern_size <= 0 ? 1 : r.min_pattern_size;
  if (r.max_pattern_size <= 0 || r.min_count < 2 || minSize > r.max_pattern_size) return false;
  for (let len = minSize; len <= r.max_pattern_size; len++) {
    if (len * r.min_count > ids.length) return false;
    let all = true;
    for (let k = 1; k <= len && all; k++) {
      const target = ids[ids.length - k];
      for (let m = 1; m < r.min_count; m++) {
        if (ids[ids.length - (len * m + k)] !== target) {
          all = false;
          break;
        }
      }
    }
    if (all) return true;
  }
  return false;
}

export type Terminal =
  { kind: "finish"; reason: "stop" | "length" | "repetition"; stopReason: number | string | null; stopToken: boolean } | { kind: "abort" };

/** One choice after vLLM's stop checks: the ids it streams and how it ends. */
export interface Run {
  ids: number[];
  end: Terminal;
  /** The stop checks cut the sampled ids before they ran out (or before a stop the model wrote at their end). */
  cutEarly: boolean;
}

/**
 * What the "model" samples for one choice: `ids`, then, when they run out,
 * `then`: the tokenizer EOS (a finished answer, as vLLM's stand-in
 * assumes), `length` (the output hit a limit there: the simulator's
 * truncation faults), or `abort` (the engine aborted the request).
 */
export interface Sampled {
  ids: readonly number[];
  then: "eos" | "length" | "abort";
}

/** One choice through the scheduler's check_stop, token by token. */
export function runChoice(s: Sampled, pl: Plan, promptLen: number, maxModelLen: number, maxTokens: number): Run {
  const out: number[] = [];
  const check = (): Terminal | null => {
    if (out.length < pl.minTokens) return null;
    const last = out[out.length - 1]!;
    if (pl.eos !== null && last === pl.eos) return { kind: "finish", reason: "stop", stopReason: null, stopToken: true };
    if (pl.stopIds.includes(last)) return { kind: "finish", reason: "stop", stopReason: last, stopToken: true };
    if (promptLen + out.length >= maxModelLen || out.length >= maxTokens)
      return { kind: "finish", reason: "length", stopReason: null, stopToken: false };
    if (pl.repetition && hasRepetition(out, pl.repetition))
      return { kind: "finish", reason: "repetition", stopReason: "repetition_detected", stopToken: false };
    return null;
  };
  for (let k = 0; ; k++) {
    let next = s.ids[k];
    if (next === undefined) {
      if (s.then === "abort") return { ids: out, end: { kind: "abort" }, cutEarly: false };
      if (s.then === "length" || pl.eos === null)
        return { ids: out, end: { kind: "finish", reason: "length", stopReason: null, stopToken: false }, cutEarly: false };
      next = pl.eos;
    }
    out.push(next);
    const end = check();
    if (end) return { ids: out, end, cutEarly: k < s.ids.length - 1 };
  }
}

/** The finish_reason of a choice's last chunk. */
export function finishReason(end: Terminal): string {
  return end.kind === "finish" ? end.reason : "abort";
}

/**
 * Text of ids as vLLM's detokenizer gives it: specials by name unless
 * `skipSpecial`, the stop token left out unless `includeStop`. `decoder`
 * holds back an incomplete UTF-8 character until its next piece.
 */
export function textOf(
  ids: readonly number[],
  dropLast: boolean,
  skipSpecial: boolean,
  bytesOf: (id: number) => Uint8Array,
  decoder: TextDecoder,
  last: boolean,
): string {
  const keep = dropLast ? ids.slice(0, -1) : ids;
  let out = "";
  for (const id of keep) {
    // special ids are dropped from text when `skip_special_tokens`
    if (skipSpecial && id >= HARMONY.firstSpecial) continue;
    out += decoder.decode(bytesOf(id), { stream: true });
  }
  if (last) out += decoder.decode();
  return out;
}

/** Placeholder logprobs, one per id (-(1 + id mod 997) / 1000, the sampled id its only alternative), as the stand-in gives. */
export function logprobsOf(
  ids: readonly number[],
  pl: Pick<Plan, "logprobs" | "asTokenIds">,
  name: (id: number) => string,
  offset: number,
): Obj | null {
  if (pl.logprobs === null) return null;
  const tokens = ids.map((id) => (pl.asTokenIds ? `token_id:${id}` : name(id)));
  const text_offset: number[] = [];
  let at = offset;
  for (const t of tokens) {
    text_offset.push(at);
    at += t.length;
  }
  const lp = ids.map((id) => -(1 + (id % 997)) / 1000);
  return { text_offset, token_logprobs: lp, tokens, top_logprobs: tokens.map((t, i) => ({ [t]: lp[i] })) };
}

export function usageOf(prompt: number, completion: number): Obj {
  return { prompt_tokens: prompt, total_tokens: prompt + completion, completion_tokens: completion };
}

/**
 * When a choice's ids go out, one engine step at a time: the first step
 * (prefill) samples one id, each later one `stepTokens` (more than one with
 * speculative decoding); a chunk goes out for the first id, then whenever
 * `interval` ids have gathered since the last chunk (output_processor's
 * make_request_output), and with the finish. An abort ends with a chunk of
 * the ids held back and no new ones (output_processor's abort_requests).
 */
export class Emitter {
  private sent = 0;
  private produced = 0;
  private state: "running" | "aborting" | "done" = "running";

  constructor(
    private readonly run: Run,
    private readonly interval: number,
    private readonly stepTokens: number,
  ) {}

  get done(): boolean {
    return this.state === "done";
  }

  /** Ids produced so far (the running sequence's length). */
  get length(): number {
    return this.produced;
  }

  /** One engine step: the chunk to send now (its ids; `last` with the finish), or null. */
  step(): { ids: number[]; last: boolean } | null {
    const total = this.run.ids.length;
    if (this.state === "done") return null;
    if (this.state === "aborting") {
      this.state = "done";
      const ids = this.run.ids.slice(this.sent);
      this.sent = total;
      return { ids, last: true };
    }
    this.produced = Math.min(total, this.produced === 0 ? 1 : this.produced + this.stepTokens);
    if (this.produced >= total && this.run.end.kind === "finish") {
      this.state = "done";
      const ids = this.run.ids.slice(this.sent);
      this.sent = total;
      return { ids, last: true };
    }
    if (this.produced >= total) this.state = "aborting";
    if (this.produced > this.sent && (this.sent === 0 || this.produced - this.sent >= this.interval)) {
      const ids = this.run.ids.slice(this.sent, this.produced);
      this.sent = this.produced;
      return { ids, last: false };
    }
    return null;
  }
}
