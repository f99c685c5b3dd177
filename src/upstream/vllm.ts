/**
 * The vLLM engine: its OpenAI-style `POST /v1/completions` streaming
 * endpoint, driven with token ids (`prompt` as ids, `return_token_ids:
 * true`), read as server-sent events.
 */
import { isObj, parseJson } from "../core/json.js";
import {
  MAX_TOP_LOGPROBS,
  stopIds,
  OPENAI_SAMPLING_FIELDS,
  UpstreamError,
  type CompletionRequest,
  type TokenLogprob,
  type UpstreamChoice,
  type Engine,
  type UpstreamChunk,
  type UpstreamConfig,
  type UpstreamUsage,
} from "./engine.js";
import { getText, postSse } from "./sse.js";

/** What the engine serves, from `GET /v1/models` (vLLM gives each model its `max_model_len`). */
export interface ServedModels {
  ids: string[];
  maxModelLen: number | null;
}

/** Read vLLM's model list: the served names and the context length. */
export function servedModels(body: string): ServedModels {
  const parsed = parseJson(body);
  const data = parsed.ok && isObj(parsed.value) && Array.isArray(parsed.value.data) ? parsed.value.data : [];
  const ids: string[] = [];
  let maxModelLen: number | null = null;
  for (const m of data as unknown[]) {
    if (!isObj(m)) continue;
    if (typeof m.id === "string") ids.push(m.id);
    if (maxModelLen === null && typeof m.max_model_len === "number" && Number.isInteger(m.max_model_len)) maxModelLen = m.max_model_len;
  }
  return { ids, maxModelLen };
}

/**
 * The served models, read once and shared by concurrent callers; read
 * again next time when the read failed or lacked what `complete` needs.
 */
export class ServedModelsCache {
  private served: Promise<ServedModels | null> | null = null;

  constructor(
    private readonly read: () => Promise<{ status: number; body: string }>,
    private readonly complete: (m: ServedModels) => boolean,
  ) {}

  get(): Promise<ServedModels | null> {
    this.served ??= this.read().then(
      (r) => (r.status === 200 ? servedModels(r.body) : null),
      () => null,
    );
    return this.served.then((m) => {
      if (m === null || !this.complete(m)) this.served = null; // ask again next time
      return m;
    });
  }
}

/**
 * The `/v1/completions` body for one generation. `max_tokens` is always
 * sent: vLLM's completions endpoint takes 16 when it is absent (its chat
 * endpoint fills the context); so the client's, else what the context has
 * left after the prompt. The model is the client's when the engine serves
 * it, else the first one it serves (vLLM answers 404 for any other name).
 */
export function completionBody(r: CompletionRequest, served: ServedModels | null): Record<string, unknown> {
  const asked = r.client.model;
  const model = served && served.ids.length > 0 && !(typeof asked === "string" && served.ids.includes(asked)) ? served.ids[0] : asked;
  const body: Record<string, unknown> = {
    model,
    prompt: r.prompt,
    stream: true,
    stream_options: { include_usage: true },
    return_token_ids: true,
    skip_special_tokens: false,
    stop_token_ids: stopIds(r),
    n: r.n,
  };
  const room = served?.maxModelLen == null ? null : served.maxModelLen - r.prompt.length;
  if (typeof r.maxTokens === "number") {
    if (room !== null && r.maxTokens > room) {
      throw new UpstreamError(
        400,
        "context_length_exceeded",
        `the prompt has ${r.prompt.length} tokens and ${r.maxTokens} more were asked for; the model's context is ${served!.maxModelLen} tokens`,
      );
    }
    body.max_tokens = r.maxTokens;
  } else if (room !== null) {
    if (room < 1) {
      throw new UpstreamError(
        400,
        "context_length_exceeded",
        `the prompt has ${r.prompt.length} tokens; the model's context is ${served!.maxModelLen}`,
      );
    }
    body.max_tokens = room;
  }
  for (const k of OPENAI_SAMPLING_FIELDS) if (r.client[k] !== undefined) body[k] = r.client[k];
  if (r.logprobs !== undefined) {
    // top-k per token, named by id ("token_id:N"), not by text that may be a partial character
    body.logprobs = r.logprobs;
    body.return_tokens_as_token_ids = true;
  }
  return body;
}

/** A token named "token_id:N" (return_tokens_as_token_ids) → N, else null. */
function tokenIdOf(name: string): number | null {
  if (!name.startsWith("token_id:")) return null;
  const n = Number(name.slice(9));
  return Number.isInteger(n) && n >= 0 ? n : null;
}

/** vLLM's completions `logprobs` (`token_logprobs`, `top_logprobs` by position) for `n` ids, bounded. */
export function readLogprobs(v: unknown, n: number): (TokenLogprob | null)[] | undefined {
  if (!isObj(v) || !Array.isArray(v.token_logprobs)) return undefined;
  const lps = v.token_logprobs;
  const tops = Array.isArray(v.top_logprobs) ? v.top_logprobs : [];
  const out: (TokenLogprob | null)[] = [];
  for (let i = 0; i < n; i++) {
    const lp = lps[i];
    if (typeof lp !== "number") {
      out.push(null);
      continue;
    }
    const top: { id: number; logprob: number }[] = [];
    const t = tops[i];
    if (isObj(t)) {
      for (const k in t) {
        if (top.length >= MAX_TOP_LOGPROBS) break;
        const id = tokenIdOf(k);
        const l = t[k];
        if (id !== null && typeof l === "number") top.push({ id, logprob: l });
      }
    }
    out.push({ logprob: lp, top });
  }
  return out;
}

export class VllmEngine implements Engine {
  /** The served models; vLLM always reports max_model_len, so a list without it is read again. */
  private readonly served = new ServedModelsCache(
    () => listModels(this.cfg.url, this.cfg.idleTimeoutMs),
    (m) => m.maxModelLen !== null,
  );

  constructor(private readonly cfg: UpstreamConfig) {}

  async *complete(request: CompletionRequest, signal: AbortSignal): AsyncGenerator<UpstreamChunk> {
    const body = completionBody(request, await this.served.get());
    yield* streamCompletions(body, { baseUrl: this.cfg.url, idleTimeoutMs: this.cfg.idleTimeoutMs, signal });
  }

  models(): Promise<{ status: number; body: string }> {
    return listModels(this.cfg.url, this.cfg.idleTimeoutMs);
  }
}

export interface UpstreamOptions {
  baseUrl: string;
  /** Abort when no byte arrives for this long. */
  idleTimeoutMs: number;
  signal: AbortSignal;
}

/** Stream completions from the upstream; yields each SSE data chunk. */
export async function* streamCompletions(body: Record<string, unknown>, opts: UpstreamOptions): AsyncGenerator<UpstreamChunk> {
  for await (const chunk of postSse("/v1/completions", body, opts)) {
    const choices = Array.isArray(chunk.choices) ? (chunk.choices as Record<string, unknown>[]) : [];
    if (choices.some((c) => !isObj(c) || !Array.isArray(c.token_ids))) {
      // an older vLLM ignores return_token_ids (an unknown field to it) and streams text only
      throw new UpstreamError(502, "upstream_bad_response", "upstream does not return token ids; vLLM ≥ 0.10.2 needed (return_token_ids)");
    }
    yield {
      choices: choices.map((c) => {
        const ids = Array.isArray(c.token_ids) ? (c.token_ids as number[]) : [];
        const choice: UpstreamChoice = {
          index: typeof c.index === "number" ? c.index : 0,
          token_ids: ids,
          finish_reason: typeof c.finish_reason === "string" ? c.finish_reason : null,
        };
        const lps = readLogprobs(c.logprobs, ids.length);
        if (lps !== undefined) choice.logprobs = lps;
        return choice;
      }),
      usage: (chunk.usage as UpstreamUsage | null | undefined) ?? null,
    };
  }
}

/** GET /v1/models, passed through. */
export function listModels(baseUrl: string, timeoutMs: number): Promise<{ status: number; body: string }> {
  return getText(baseUrl, "/v1/models", timeoutMs);
}
