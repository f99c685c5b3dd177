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
 *
 * Ids held inside a split character (`process_token`: while `generated_text` ends
 * inside a UTF-8 character no partial is sent, and the next partial's `tokens` holds
 * only its own id while its `content` holds the text of every id since the last one
 * sent): the partial's `tokens_predicted` (n_decoded) says how many ids it stands for.
 * When that is more than it carries, the ids are taken from its text instead, which
 * holds them whole: the request asks for Harmony's specials as text
 * (`preserved_tokens`; server-task.cpp `params_from_json_cmpl`, and the server's
 * `accept_special_token`), so a special held with them is in the text too. A build
 * that writes no special's text (no `preserved_tokens`) has its text re-encoded as
 * ordinary text, taken only when it makes exactly as many ids as were held. Text that
 * does not end with the partial's own id, or ids held until the end (a character the
 * stream ended inside of: the final chunk's `tokens_predicted` is more than the
 * partials carried), cannot be given back: a 502 `upstream_lost_tokens`, never an
 * answer with characters missing.
 */
import { isObj } from "../core/json.js";
import {
  STOP,
  unauthorized,
  UpstreamError,
  type CompletionRequest,
  type Engine,
  type EventAnswer,
  type OnChunk,
  type EngineVocabulary,
  type UpstreamConfig,
} from "./engine.js";
import { checkIds, checkUsage, ChoiceLimits, vocabSize } from "./read.js";
import { ENGINE_RULES, engineRequest } from "./request.js";
import { getJsonObject, getText, streamSse } from "./sse.js";

/** How a final chunk ended, in the finish reasons generate.ts knows. */
export function llamacppFinish(c: Record<string, unknown>): string {
  const t = c.stop_type;
  if (typeof t === "string") return t === "eos" || t === "word" ? "stop" : t === "limit" ? "length" : "abort";
  // builds before stop_type
  if (c.stopped_eos === true || c.stopped_word === true) return "stop";
  if (c.stopped_limit === true) return "length";
  return "abort";
}

function lost(message: string): UpstreamError {
  return new UpstreamError(502, "upstream_lost_tokens", `llama-server ${message}`);
}

/** The bytes an id's piece has in `content`: its own, or a special's name (or nothing, when specials are not written out). */
function pieceBytes(vocab: EngineVocabulary, id: number, specialsAsText: boolean): Buffer {
  const t = vocab.table;
  if (id >= vocab.firstSpecial && !specialsAsText) return Buffer.alloc(0);
  return Buffer.from(t.bytes.buffer, t.bytes.byteOffset + t.offsets[id]!, t.offsets[id + 1]! - t.offsets[id]!);
}

/**
 * The ids of llama-server's partial chunks, those it held inside a split
 * character included (taken from the text that carries them).
 */
export class PartialIds {
  /** Whether the server writes a special's text into `content` (learnt from the first special seen alone). */
  private specialsAsText: boolean | null = null;
  /** `tokens_predicted` of the last partial: the ids accounted for (null: the partials say none). */
  private predicted: number | null = null;

  constructor(private readonly vocab: EngineVocabulary | undefined) {}

  /** One partial: its ids (checked), its text, its `tokens_predicted`; the ids to parse, and how many of the engine's they stand for. */
  read(ids: number[], content: string, predicted: unknown): { ids: number[]; stands: number } {
    let held = 0;
    if (typeof predicted === "number" && Number.isSafeInteger(predicted)) {
      held = predicted - (this.predicted ?? 0) - ids.length;
      this.predicted = Math.max(this.predicted ?? 0, predicted);
    }
    const v = this.vocab;
    if (v && held <= 0 && ids.length === 1 && ids[0]! >= v.firstSpecial && this.specialsAsText === null) {
      // a special alone: its text in content, or nothing
      if (content !== "") this.specialsAsText = content === pieceBytes(v, ids[0]!, true).toString("latin1");
      else this.specialsAsText = false;
    }
    if (held <= 0) return { ids, stands: ids.length }; // every id is here: the ids are the answer, whatever the text
    if (!v) throw lost(`held back ${held} ids inside a split character, and no vocabulary is configured to read them from the text`);
    const text = Buffer.from(content, "utf8");
    const asText = this.specialsAsText !== false;
    const own = Buffer.concat(ids.map((id) => pieceBytes(v, id, asText)));
    if (text.length < own.length || !text.subarray(text.length - own.length).equals(own)) {
      throw lost(`held back ${held} ids, and the text it sent for them does not end with the id it sent (${ids.join(", ")})`);
    }
    const stands = held + ids.length;
    if (asText) return { ids: v.encode(content), stands };
    const again = v.encodeOrdinary(content);
    if (again.length !== held + ids.length) {
      throw lost(`held back ${held} ids, and its text (which writes out no special) makes ${again.length} ids, not ${held + ids.length}`);
    }
    return { ids: again, stands };
  }

  /** The final chunk's `tokens_predicted`, less the ids it carries itself: more than the partials gave is ids lost. */
  end(predicted: unknown, carried: number): void {
    if (this.predicted === null || typeof predicted !== "number" || !Number.isSafeInteger(predicted)) return;
    const missing = predicted - this.predicted - carried;
    if (missing > 0) throw lost(`ended with ${missing} ids held back inside a character it never finished, and never sent`);
  }
}

export class LlamacppEngine implements Engine {
  private readonly rules = ENGINE_RULES.llamacpp;
  private nCtx: Promise<number | null> | null = null;

  constructor(private readonly cfg: UpstreamConfig) {}

  /** The slot's context, read once from `/props` (again after a failed read). */
  private contextSize(): Promise<number | null> {
    this.nCtx ??= getJsonObject(this.cfg.url, "/props", this.cfg.idleTimeoutMs, { apiKey: this.cfg.apiKey }).then((p) => {
      const s = p && isObj(p.default_generation_settings) ? p.default_generation_settings : null;
      return s && typeof s.n_ctx === "number" && Number.isSafeInteger(s.n_ctx) && s.n_ctx > 0 ? s.n_ctx : null;
    });
    return this.nCtx.then((n) => {
      if (n === null) this.nCtx = null;
      return n;
    });
  }

  async stream(request: CompletionRequest, signal: AbortSignal, onChunk: OnChunk, onDrained?: () => EventAnswer): Promise<void> {
    const er = engineRequest(this.rules, request, { ids: [], context: await this.contextSize() });
    const size = vocabSize(this.cfg);
    const limits = new ChoiceLimits(1, er.limit);
    const partials = new PartialIds(this.cfg.vocab);
    let got = 0;
    let ended = false;
    // the choice cut at its limit: the engine is not waited for
    let cut = false;
    const opts = {
      baseUrl: this.cfg.url,
      idleTimeoutMs: this.cfg.idleTimeoutMs,
      deadlineMs: this.cfg.deadlineMs,
      apiKey: this.cfg.apiKey,
      signal,
      done: false,
    };
    await streamSse(
      er.path,
      er.body,
      opts,
      (c) => {
        if (ended) return;
        const content = typeof c.content === "string" ? c.content : "";
        const tokens = c.tokens === undefined || c.tokens === null ? null : checkIds(c.tokens, size);
        if (c.stop === true) {
          ended = true;
          // the final chunk repeats every token in older builds: only what was not streamed yet counts
          const rest = tokens ? tokens.slice(got) : [];
          if (got === 0 && rest.length === 0 && content !== "") throw new UpstreamError(502, "upstream_bad_response", this.rules.noIds);
          partials.end(c.tokens_predicted, rest.length);
          const prompt = typeof c.tokens_evaluated === "number" ? c.tokens_evaluated : request.prompt.length;
          const completion = typeof c.tokens_predicted === "number" ? c.tokens_predicted : got + rest.length;
          const usage = checkUsage({ prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion });
          const taken = limits.take({ index: 0, token_ids: rest, finish_reason: llamacppFinish(c) });
          return onChunk({ choices: taken ? [taken] : [], usage });
        }
        if (tokens === null || (tokens.length === 0 && content !== ""))
          throw new UpstreamError(502, "upstream_bad_response", this.rules.noIds);
        got += tokens.length;
        if (tokens.length === 0) return;
        const read = partials.read(tokens, content, c.tokens_predicted);
        const taken = limits.take({ index: 0, token_ids: read.ids, finish_reason: null }, read.stands);
        const answer = taken ? onChunk({ choices: [taken], usage: null }) : undefined;
        if (answer === STOP) cut = true;
        else if (limits.overrun) {
          cut = true;
          return answer === undefined ? STOP : answer.then(() => STOP);
        }
        return answer;
      },
      onDrained,
    );
    if (!ended && !cut && !signal.aborted) {
      throw new UpstreamError(502, "upstream_broken_stream", "the upstream stream ended before its last chunk (stop: true)");
    }
  }

  /** llama-server's OpenAI-compatible model list. */
  async models(): Promise<{ status: number; body: string }> {
    const r = await getText(this.cfg.url, "/v1/models", this.cfg.idleTimeoutMs, { apiKey: this.cfg.apiKey });
    if (r.status === 401 || r.status === 403) throw unauthorized(r.status, "GET /v1/models");
    return { status: r.status, body: r.body };
  }

  kind(): Promise<"llamacpp"> {
    return Promise.resolve("llamacpp");
  }
}
