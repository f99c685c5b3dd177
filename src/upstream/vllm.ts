/**
 * The vLLM engine: its OpenAI-style `POST /v1/completions` streaming
 * endpoint, driven with token ids (`prompt` as ids, `return_token_ids:
 * true`), read as server-sent events. The request is built from
 * `ENGINE_RULES.vllm` (./request.ts); the stream is read by ./completions.ts.
 */
import { isObj, parseJson } from "../core/json.js";
import { streamCompletions } from "./completions.js";
import {
  MAX_TOP_LOGPROBS,
  unauthorized,
  type CompletionRequest,
  type Engine,
  type EventAnswer,
  type OnChunk,
  type TokenLogprob,
  type UpstreamConfig,
} from "./engine.js";
import { ENGINE_RULES, engineRequest } from "./request.js";
import { getText } from "./sse.js";

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
    const len = m.max_model_len;
    if (maxModelLen === null && typeof len === "number" && Number.isSafeInteger(len) && len > 0) maxModelLen = len;
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

/** vLLM's finish reasons pass as they are: generate.ts knows stop, length, repetition, abort and error. */
function vllmFinish(f: unknown): string | null {
  return typeof f === "string" ? f : null;
}

export class VllmEngine implements Engine {
  private readonly rules = ENGINE_RULES.vllm;
  /** The served models; vLLM always reports max_model_len, so a list without it is read again. */
  private readonly served = new ServedModelsCache(
    () => this.models(),
    (m) => m.maxModelLen !== null,
  );

  constructor(private readonly cfg: UpstreamConfig) {}

  async stream(request: CompletionRequest, signal: AbortSignal, onChunk: OnChunk, onDrained?: () => EventAnswer): Promise<void> {
    const m = await this.served.get();
    const er = engineRequest(this.rules, request, m && { ids: m.ids, context: m.maxModelLen });
    await streamCompletions(this.rules, this.cfg, request, er, signal, { finish: vllmFinish, logprobs: readLogprobs }, onChunk, onDrained);
  }

  models(): Promise<{ status: number; body: string }> {
    return listModels(this.cfg);
  }

  kind(): Promise<"vllm"> {
    return Promise.resolve("vllm");
  }
}

/** GET /v1/models with the engine's key, passed through; an engine that refuses the key is a 502 that says so. */
export async function listModels(cfg: UpstreamConfig): Promise<{ status: number; body: string }> {
  const r = await getText(cfg.url, "/v1/models", cfg.idleTimeoutMs, { apiKey: cfg.apiKey });
  if (r.status === 401 || r.status === 403) throw unauthorized(r.status, "GET /v1/models");
  return { status: r.status, body: r.body };
}
