/**
 * A stand-in for SGLang's OpenAI-compatible server, written from SGLang's own
 * source, for tests without a GPU: `POST /v1/completions` (streaming) driven by
 * token ids, `GET /v1/models`, `GET /get_model_info`, `GET /health`. What the
 * "model" samples is scripted (`script({ tokens })`); what SGLang does with it
 * is SGLang's.
 *
 * Sources read (repository sgl-project/sglang; the commit is the version the code
 * index held for each file):
 * - python/sglang/srt/entrypoints/openai/protocol.py @ 004c82e07d876f6e4a0ad6e15325706b0f478f1a
 *   `CompletionRequest` (plain `BaseModel`: unknown fields ignored; `max_tokens: int = 16`
 *   and `validate_max_tokens_positive`; `return_token_ids`; `stop_token_ids`; `n`),
 *   `CompletionResponseStreamChoice` (`finish_reason` in stop/length/content_filter/abort,
 *   `matched_stop`, `token_ids` and `prompt_token_ids` dropped when None), the stream
 *   response (`usage: null` in chunks), `UsageInfo` (`reasoning_tokens`), `ModelCard`
 *   (`owned_by: "sglang"`, `max_model_len`), flat `ErrorResponse`.
 * - python/sglang/srt/entrypoints/openai/serving_completions.py @ 004c82e07d876f6e4a0ad6e15325706b0f478f1a
 *   `_validate_request` ("Prompt cannot be empty"), `_generate_completion_stream` (one choice
 *   per chunk; `token_ids` = new slice of `output_ids`; `prompt_token_ids` on a choice's first
 *   chunk; abort with a status → `data: {"error": …}` then `[DONE]`; graceful abort →
 *   `finish_reason: "abort"`; the usage chunk with `exclude_none`; `[DONE]`), and
 *   `_handle_streaming_request` (the first chunk awaited before the 200: a ValueError is a 400).
 * - python/sglang/srt/managers/detokenizer_manager.py @ 000935bdda57675933def88a37dcd6786a2de0d1
 *   the matched stop token is trimmed from the text, not from `output_ids`.
 * - python/sglang/srt/managers/tokenizer_manager.py `_validate_one_request` (index excerpt):
 *   "The input (N tokens) is longer than the model's context length (L tokens)." and
 *   "Requested token count exceeds the model's maximum context length of L tokens. …"
 *   (prompt + max_new_tokens >= L).
 * - http_server.py `available_models` (index excerpts): one card, `max_model_len = context_len`.
 * - The model's EOS ids stop generation with `matched_stop` = the id (FINISH_MATCHED_TOKEN);
 *   gpt-oss: 200002, 199999, 200012 (generation config, as in the vLLM stand-in).
 * - `CompletionRequest` (protocol.py @ 004c82e07d876f6e4a0ad6e15325706b0f478f1a) declares
 *   `temperature: float = 1.0`, `top_p: float = 1.0`, `top_k: int = -1`, `min_p: float = 0.0`,
 *   `presence_penalty`/`frequency_penalty: float = 0.0`, `repetition_penalty: float = 1.0`,
 *   `max_tokens: int = 16`, `n: int = 1` (none Optional): pydantic refuses a `null` for any of
 *   them, a 400 whose message counts them ("N validation errors for CompletionRequest", as
 *   measured against a running SGLang, issue #31); `seed`, `stop`, `logit_bias`, `user` are Optional.
 * - python/sglang/srt/utils/auth.py @ a343daaf647ea0c8c4a05cd2b5cfa0afc9e303f8 (`--api-key`): every
 *   path but /health* and /metrics* needs `Authorization: Bearer <key>`, else 401
 *   `{"error": "Unauthorized"}`.
 * - `/metrics` (with `--enable-metrics`; `sglang:` series such as `sglang:num_running_reqs`, read
 *   in index excerpts of metrics_collector.py): Prometheus text; without the flag, no route (404).
 *
 * Profile "old": an SGLang from before `return_token_ids` on completions: the field is
 * ignored, chunks carry text only.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { defaultDecode } from "./vllm.js";
import { recordingServer, type Received } from "./recording.js";

type Obj = Record<string, unknown>;

export interface SglangConfig {
  profile: "current" | "old";
  servedModelName: string;
  /** `--context-length` (the model's by default). */
  contextLength: number;
  /** The model's EOS ids (tokenizer and generation config). */
  eosTokenIds: number[];
  /** `--enable-cache-report`. */
  cacheReport: boolean;
  cachedTokens: number;
  /** `--api-key` (null: none). */
  apiKey: string | null;
  /** `--enable-metrics`. */
  enableMetrics: boolean;
}

export interface SglangScript {
  /** The ids the model samples, per choice or one list for all. Runs out → the model samples EOS. */
  tokens?: number[] | number[][];
  /** The engine aborts the request after this many ids (graceful: finish "abort"). */
  abortAfter?: number;
  /** The scheduler aborts with an HTTP status after this many ids (an error event, then [DONE]). */
  abortWithStatusAfter?: number;
  /** Answer this HTTP status (with `errorBody`) instead of generating. */
  status?: number;
  errorBody?: unknown;
  delayMs?: number;
  config?: Partial<SglangConfig>;
}

export type { Received };

export interface SglangStandIn {
  url: string;
  config: SglangConfig;
  received: Received[];
  completions(): Received[];
  script(...s: SglangScript[]): void;
  close(): Promise<void>;
}

export const SGLANG_GPT_OSS: Readonly<SglangConfig> = Object.freeze({
  profile: "current",
  servedModelName: "openai/gpt-oss-20b",
  contextLength: 131072,
  eosTokenIds: [200002, 199999, 200012],
  cacheReport: false,
  cachedTokens: 0,
  apiKey: null,
  enableMetrics: true,
});

/** CompletionRequest's fields that are not Optional, with the pydantic error for a null. */
const NOT_NULL: Readonly<Record<string, string>> = {
  temperature: "float_type",
  top_p: "float_type",
  top_k: "int_type",
  min_p: "float_type",
  presence_penalty: "float_type",
  frequency_penalty: "float_type",
  repetition_penalty: "float_type",
  max_tokens: "int_type",
  n: "int_type",
};

class Fail extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = "BadRequest",
  ) {
    super(message);
  }
}

function isIntList(v: unknown): v is number[] {
  return Array.isArray(v) && v.length > 0 && v.every((x) => Number.isInteger(x) && (x as number) >= 0);
}

export async function startSglang(initial: Partial<SglangConfig> = {}): Promise<SglangStandIn> {
  const config: SglangConfig = { ...SGLANG_GPT_OSS, ...initial };
  let scripts: SglangScript[] = [{}];
  const received: Received[] = [];

  const json = (res: http.ServerResponse, rec: Received, status: number, body: unknown) => {
    rec.status = status;
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  };
  const errorResponse = (e: Fail) => ({ object: "error", message: e.message, type: e.type, param: null, code: e.status });

  const server = recordingServer(received, route);

  async function route(req: http.IncomingMessage, res: http.ServerResponse, rec: Received): Promise<void> {
    // auth.py decide_request_auth: health and metrics stay open
    if (
      config.apiKey !== null &&
      !rec.path.startsWith("/health") &&
      !rec.path.startsWith("/metrics") &&
      req.headers.authorization !== `Bearer ${config.apiKey}`
    )
      return json(res, rec, 401, { error: "Unauthorized" });
    if (rec.path === "/metrics" && req.method === "GET" && config.enableMetrics) {
      const text = [
        "# HELP sglang:num_running_reqs The number of running requests.",
        "# TYPE sglang:num_running_reqs gauge",
        `sglang:num_running_reqs{model_name="${config.servedModelName}"} 0.0`,
        "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.",
        "# TYPE sglang:num_queue_reqs gauge",
        `sglang:num_queue_reqs{model_name="${config.servedModelName}"} 0.0`,
        "",
      ].join("\n");
      rec.status = 200;
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
      res.end(text);
      return;
    }
    if (rec.path === "/health" && req.method === "GET") {
      rec.status = 200;
      res.end();
      return;
    }
    if (rec.path === "/v1/models" && req.method === "GET") {
      return json(res, rec, 200, {
        object: "list",
        data: [
          {
            id: config.servedModelName,
            object: "model",
            created: Math.floor(Date.now() / 1000),
            owned_by: "sglang",
            root: config.servedModelName,
            parent: null,
            max_model_len: config.contextLength,
          },
        ],
      });
    }
    if (rec.path === "/get_model_info" && req.method === "GET") {
      return json(res, rec, 200, { model_path: config.servedModelName, tokenizer_path: config.servedModelName, is_generation: true });
    }
    if (rec.path !== "/v1/completions" || req.method !== "POST") return json(res, rec, 404, { detail: "Not Found" });
    const s = scripts.length > 1 ? scripts.shift()! : scripts[0]!;
    const cfg: SglangConfig = { ...config, ...(s.config ?? {}) };
    if (s.status) return json(res, rec, s.status, s.errorBody ?? errorResponse(new Fail(s.status, `scripted ${s.status}`)));
    const b = rec.body;
    try {
      if (!b) throw new Fail(400, "the request body must be a JSON object");
      // pydantic: the fields that are not Optional refuse a null
      const nulls = Object.keys(NOT_NULL).filter((k) => b[k] === null);
      if (nulls.length > 0)
        throw new Fail(
          400,
          `${nulls.length} validation error${nulls.length > 1 ? "s" : ""} for CompletionRequest\n` +
            nulls
              .map(
                (k) =>
                  `${k}\n  Input should be a valid ${NOT_NULL[k] === "int_type" ? "integer" : "number"} [type=${NOT_NULL[k]}, input_value=None, input_type=NoneType]`,
              )
              .join("\n"),
        );
      // pydantic: max_tokens is an int (not Optional), > 0
      const maxTokens = b.max_tokens === undefined ? 16 : b.max_tokens;
      if (typeof maxTokens !== "number" || !Number.isInteger(maxTokens)) throw new Fail(400, "max_tokens: Input should be a valid integer");
      if (maxTokens <= 0) throw new Fail(400, "max_tokens must be positive");
      if (!isIntList(b.prompt)) throw new Fail(400, "Prompt cannot be empty");
      const prompt = b.prompt;
      const n = typeof b.n === "number" ? b.n : 1;
      const L = cfg.contextLength;
      // tokenizer_manager._validate_one_request (a ValueError before the first chunk: 400)
      if (prompt.length >= L)
        throw new Fail(400, `The input (${prompt.length} tokens) is longer than the model's context length (${L} tokens).`);
      if (maxTokens + prompt.length >= L)
        throw new Fail(
          400,
          `Requested token count exceeds the model's maximum context length of ${L} tokens. You requested a total of ${maxTokens + prompt.length} tokens: ${prompt.length} tokens from the input messages and ${maxTokens} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`,
        );
      const stopIds = new Set<number>([
        ...(Array.isArray(b.stop_token_ids) ? (b.stop_token_ids as number[]) : []),
        ...(b.ignore_eos === true ? [] : cfg.eosTokenIds),
      ]);
      const returnIds = cfg.profile === "current" && b.return_token_ids === true;
      const skipSpecial = b.skip_special_tokens !== false;
      const so = b.stream_options as Obj | null | undefined;
      const includeUsage = !!so && so.include_usage === true;
      if (b.stream !== true) throw new Fail(400, "the stand-in streams only");
      rec.status = 200;
      res.writeHead(200, { "content-type": "text/event-stream" });
      const id = `${Math.random().toString(16).slice(2)}`;
      const created = Math.floor(Date.now() / 1000);
      const send = (data: unknown) => {
        rec.events.push(data);
        res.write(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
      };
      const perChoice = (i: number): number[] => {
        const t = s.tokens ?? [];
        return Array.isArray(t[0]) ? ((t as number[][])[i] ?? []) : (t as number[]);
      };
      let completionTokens = 0;
      for (let i = 0; i < n; i++) {
        const sampled = [...perChoice(i)];
        const out: number[] = [];
        let finish: { type: string; matched: number | null } | null = null;
        let first = true;
        while (!finish) {
          if (s.abortWithStatusAfter === out.length) {
            send({
              error: { object: "error", message: "Request aborted by scheduler.", type: "INTERNAL_SERVER_ERROR", param: null, code: 500 },
            });
            send("[DONE]");
            res.end();
            return;
          }
          let tok: number | undefined;
          if (s.abortAfter === out.length) finish = { type: "abort", matched: null };
          else {
            tok = sampled.shift() ?? cfg.eosTokenIds[0]!;
            out.push(tok);
            if (stopIds.has(tok)) finish = { type: "stop", matched: tok };
            else if (out.length >= maxTokens) finish = { type: "length", matched: null };
          }
          const ids = tok === undefined ? [] : [tok];
          const drop = finish?.type === "stop";
          const text = ids
            .slice(0, drop ? 0 : ids.length)
            .filter((x) => !(skipSpecial && x >= 199998))
            .map(defaultDecode)
            .join("");
          const choice: Obj = {
            index: i,
            text,
            logprobs: null,
            finish_reason: finish?.type ?? null,
            matched_stop: finish?.matched ?? null,
          };
          if (returnIds) {
            choice.token_ids = ids;
            if (first) choice.prompt_token_ids = prompt;
          }
          first = false;
          send({ id, object: "text_completion", created, model: b.model ?? "default", choices: [choice], usage: null });
          if (s.delayMs) await new Promise((r) => setTimeout(r, s.delayMs));
        }
        completionTokens += out.length;
      }
      if (includeUsage) {
        const usage: Obj = {
          prompt_tokens: prompt.length,
          total_tokens: prompt.length + completionTokens,
          completion_tokens: completionTokens,
        };
        if (cfg.cacheReport) usage.prompt_tokens_details = { cached_tokens: cfg.cachedTokens };
        usage.reasoning_tokens = 0;
        send({ id, object: "text_completion", created, model: b.model ?? "default", choices: [], usage });
      }
      send("[DONE]");
      res.end();
    } catch (e) {
      if (e instanceof Fail) return json(res, rec, e.status, errorResponse(e));
      throw e;
    }
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    config,
    received,
    completions: () => received.filter((r) => r.path === "/v1/completions"),
    script: (...s) => {
      scripts = s.length ? s : [{}];
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
