/**
 * The llama.cpp engine (`llama-server`): its native `POST /completion`,
 * driven with token ids (`prompt` as ids, `return_tokens: true`: each chunk
 * carries `tokens`), read as server-sent events.
 *
 * Read in llama.cpp's source (repository ggml-org/llama.cpp; the commit is the
 * version the code index held):
 * - tools/server/server-task.cpp @ 00efb3e184262872916bf136b3df63c1822a19bd
 *   `params_from_json_cmpl`: `stream`, `return_tokens`, `n_predict` (else `max_tokens`,
 *   else the server's `-n`, -1 = until the context is full), `n_cmpl`/`n`, `temperature`,
 *   `top_k`, `top_p`, `min_p`, `seed`, `repeat_penalty`, `presence_penalty`,
 *   `frequency_penalty`, `logit_bias` (object or pairs), `stop` (an array of strings only:
 *   there are no stop token ids; unknown fields are ignored); the partial chunk
 *   `{index, content, tokens, stop: false, id_slot, tokens_predicted, tokens_evaluated}`,
 *   the final one `{…, stop: true, stop_type: "eos"|"word"|"limit"|"none", stopping_word,
 *   truncated, tokens_predicted, tokens_evaluated, timings}`.
 * - tools/server/server-context.cpp (index excerpts; listed @ fb4026604c67c682f552337ec9b91eced0abd35a):
 *   `process_token` (every token, the end-of-generation one included, goes out in a partial
 *   with `tokens: [id]`; EOG → stop_type eos; `n_past + 1 >= n_ctx` → limit, truncated),
 *   `send_final_response` (in stream mode the final chunk has `content: ""`, `tokens: []`;
 *   older builds repeated every token there), `handle_completions_impl` (an error before the
 *   first result is a plain HTTP error `{"error": {code, message, type}}`; one later is
 *   `data: {"error": …}` and the stream ends; `/completion` sends no `[DONE]`), `/props`
 *   (`default_generation_settings.n_ctx`: the per-slot context).
 * - llama-vocab.cpp (index excerpt) and gpt-oss GGUF load logs: the end-of-generation set
 *   of gpt-oss is `<|endoftext|>` 199999, `<|return|>` 200002, `<|call|>` 200012
 *   (`<|end|>` removed), exactly Harmony's stop ids, which therefore need not be sent.
 * - Builds from before `return_tokens` (and the `stopped_eos` / `stopped_word` /
 *   `stopped_limit` booleans of older finals) are read too where they still give ids;
 *   a build that streams text without ids is a 502 here.
 *
 * `/completion` makes one completion per request here: `n` > 1 is refused with a 400
 * (older builds ignore `n`; `n_cmpl` needs as many server slots).
 */
import { isObj } from "../core/json.js";
import { logprobsRefused, UpstreamError, type CompletionRequest, type Engine, type UpstreamChunk, type UpstreamConfig } from "./engine.js";
import { getJsonObject, getText, postSse } from "./sse.js";

/** Sampling fields of an OpenAI request, by llama.cpp's name for them. */
const PASSTHROUGH: Readonly<Record<string, string>> = {
  temperature: "temperature",
  top_p: "top_p",
  top_k: "top_k",
  min_p: "min_p",
  seed: "seed",
  presence_penalty: "presence_penalty",
  frequency_penalty: "frequency_penalty",
  repetition_penalty: "repeat_penalty",
  logit_bias: "logit_bias",
};

/** The `/completion` body; `nCtx` is the slot's context from `/props`, when known. */
export function llamacppBody(r: CompletionRequest, nCtx: number | null): Record<string, unknown> {
  if (r.n !== 1) {
    throw new UpstreamError(
      400,
      "upstream_error",
      "n must be 1 with a llama.cpp upstream: its /completion makes one completion per request",
    );
  }
  const body: Record<string, unknown> = { prompt: r.prompt, stream: true, return_tokens: true };
  const room = nCtx === null ? null : nCtx - r.prompt.length;
  if (room !== null && room < 1) {
    throw new UpstreamError(400, "context_length_exceeded", `the prompt has ${r.prompt.length} tokens; the model's context is ${nCtx}`);
  }
  if (typeof r.maxTokens === "number") {
    if (room !== null && r.maxTokens > room) {
      throw new UpstreamError(
        400,
        "context_length_exceeded",
        `the prompt has ${r.prompt.length} tokens and ${r.maxTokens} more were asked for; the model's context is ${nCtx} tokens`,
      );
    }
    body.n_predict = r.maxTokens;
  } else if (room !== null) body.n_predict = room;
  for (const [from, to] of Object.entries(PASSTHROUGH)) if (r.client[from] !== undefined) body[to] = r.client[from];
  const stop = r.client.stop;
  if (typeof stop === "string") body.stop = [stop];
  else if (Array.isArray(stop)) body.stop = stop;
  return body;
}

/** How a final chunk ended, in the finish reasons generate.ts knows. */
export function llamacppFinish(c: Record<string, unknown>): string {
  const t = c.stop_type;
  if (typeof t === "string") return t === "eos" || t === "word" ? "stop" : t === "limit" ? "length" : "abort";
  // builds before stop_type
  if (c.stopped_eos === true || c.stopped_word === true) return "stop";
  if (c.stopped_limit === true) return "length";
  return "abort";
}

const NO_IDS = "upstream does not return token ids; a llama-server whose /completion takes return_tokens is needed";

export class LlamacppEngine implements Engine {
  private nCtx: Promise<number | null> | null = null;

  constructor(private readonly cfg: UpstreamConfig) {}

  /** The slot's context, read once from `/props` (again after a failed read). */
  private contextSize(): Promise<number | null> {
    this.nCtx ??= getJsonObject(this.cfg.url, "/props", this.cfg.idleTimeoutMs).then((p) => {
      const s = p && isObj(p.default_generation_settings) ? p.default_generation_settings : null;
      return s && typeof s.n_ctx === "number" && s.n_ctx > 0 ? s.n_ctx : null;
    });
    return this.nCtx.then((n) => {
      if (n === null) this.nCtx = null;
      return n;
    });
  }

  async *complete(request: CompletionRequest, signal: AbortSignal): AsyncGenerator<UpstreamChunk> {
    if (request.logprobs !== undefined) throw logprobsRefused("llamacpp");
    if (request.stopIds && request.stopIds.length > 0) {
      throw new UpstreamError(
        400,
        "upstream_error",
        "llama-server's /completion takes no stop token ids, which tool_choice \"required\" or a named function needs (the call is put into the prompt after the model's reasoning): not supported with --upstream-kind llamacpp",
      );
    }
    const body = llamacppBody(request, await this.contextSize());
    let got = 0;
    let ended = false;
    const opts = { baseUrl: this.cfg.url, idleTimeoutMs: this.cfg.idleTimeoutMs, signal, done: false };
    for await (const c of postSse("/completion", body, opts)) {
      if (ended) continue;
      const content = typeof c.content === "string" ? c.content : "";
      const tokens = Array.isArray(c.tokens) ? (c.tokens as number[]) : null;
      if (c.stop === true) {
        ended = true;
        // the final chunk repeats every token in older builds: only what was not streamed yet counts
        const rest = tokens ? tokens.slice(got) : [];
        if (got === 0 && rest.length === 0 && content !== "") throw new UpstreamError(502, "upstream_bad_response", NO_IDS);
        const prompt = typeof c.tokens_evaluated === "number" ? c.tokens_evaluated : request.prompt.length;
        const completion = typeof c.tokens_predicted === "number" ? c.tokens_predicted : got + rest.length;
        yield {
          choices: [{ index: 0, token_ids: rest, finish_reason: llamacppFinish(c) }],
          usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
        };
        continue;
      }
      if (tokens === null || (tokens.length === 0 && content !== "")) throw new UpstreamError(502, "upstream_bad_response", NO_IDS);
      got += tokens.length;
      if (tokens.length > 0) yield { choices: [{ index: 0, token_ids: tokens, finish_reason: null }], usage: null };
    }
    if (!ended && !signal.aborted) {
      throw new UpstreamError(502, "upstream_broken_stream", "the upstream stream ended before its last chunk (stop: true)");
    }
  }

  /** llama-server's OpenAI-compatible model list. */
  models(): Promise<{ status: number; body: string }> {
    return getText(this.cfg.url, "/v1/models", this.cfg.idleTimeoutMs);
  }
}
