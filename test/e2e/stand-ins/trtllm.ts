/**
 * A stand-in for TensorRT-LLM's `trtllm-serve`, written from TensorRT-LLM's own
 * source, for tests without a GPU: `POST /v1/completions` (streaming) driven by
 * token ids with `detokenize: false`, `GET /v1/models`, `GET /health`,
 * `GET /version`. What the "model" samples is scripted (`script({ tokens })`);
 * what trtllm-serve does with it is TensorRT-LLM's.
 *
 * Sources read (repository NVIDIA/TensorRT-LLM; the commit is the version the code
 * index held for each file):
 * - tensorrt_llm/serve/openai_protocol.py @ 0076e9390e1ed11515f149eec356f5a03f4a00d8
 *   `OpenAIBaseModel` `extra="forbid"` (an unknown field is a validation error);
 *   `CompletionRequest` (`model` required, `max_tokens: Optional[int] = None`,
 *   `detokenize`, `stop_token_ids`, `include_stop_str_in_output`, `validate_stream_options`:
 *   "Stream options can only be defined when stream is true.", `check_suffix`);
 *   `CompletionResponseStreamChoice` (`text`, `token_ids`, `logprobs`, `finish_reason`,
 *   `stop_reason`, `avg_decoded_tokens_per_iter`); `ModelCard` (`owned_by:
 *   "tensorrt_llm"`, no context length); `UsageInfo` with `prompt_tokens_details`.
 * - tensorrt_llm/serve/postprocess_handlers.py @ 01bf19231d29d8f0766e31c117d1cf39ed00d3d5
 *   `completion_stream_post_processor`: `text: ""`, `token_ids: token_ids_diff` with
 *   `detokenize: false` (`token_ids: null` otherwise); chunks dumped with every field
 *   (`"usage": null`); the usage chunk when `stream_options.include_usage` and done.
 * - tensorrt_llm/serve/openai_server.py @ 00057725d9a6591f033e44f31c219e2426827bb7
 *   `validation_exception_handler` (400 `{"error": str(exc)}`), `create_error_response`
 *   (400 `{"object":"error","message","type":"BadRequestError","param":null,"code":400}`),
 *   `openai_completion` (model name not checked; answers with the request's `model`; an
 *   exception mid-stream is re-raised: the connection breaks, no `[DONE]`),
 *   `generator_wrapper` (`data: [DONE]`), `get_model`, `health`, `version`.
 * - tensorrt_llm/executor/result.py (index excerpt): END_ID → "stop" (stop_reason None);
 *   STOP_WORDS (stop_token_ids) → "stop", stop_reason = the id, the id cut from
 *   `token_ids` unless `include_stop_str_in_output`; LENGTH → "length"; "timeout";
 *   "cancelled".
 * - tensorrt_llm/executor/base_worker.py `_deduce_max_tokens` (index excerpt): max_tokens
 *   None → max_seq_len − prompt; larger → lowered to it; ≤ 0 → ValueError.
 *
 * - postprocess_handlers.py @ 01bf19231d29d8f0766e31c117d1cf39ed00d3d5 again: the streaming
 *   post-processor runs once per executor response and emits a chunk `for output in
 *   rsp.outputs`, every choice every time, with `token_ids_diff`; executor/result.py
 *   `_handle_sequence` (index excerpt) moves `_last_token_ids_len` only for the sequence the
 *   response is for, so with n > 1 each other choice is sent again with its last ids (and, once
 *   finished, its finish reason again).
 * - openai_protocol.py @ 0076e9390e1ed11515f149eec356f5a03f4a00d8 `CompletionRequest`: `n: int = 1`,
 *   `top_k: int = 0`, `min_p: float = 0.0`, `repetition_penalty: float = 1.0` are not Optional:
 *   a null is a validation error (400 through `validation_exception_handler`); the OpenAI
 *   fields (temperature, top_p, penalties, seed, user, logit_bias, stop) are Optional.
 * - openai_server.py @ 00057725d9a6591f033e44f31c219e2426827bb7 `register_routes`: `/metrics` is
 *   `get_iteration_stats`, a JSON list of iteration stats; Prometheus text is mounted at
 *   `/prometheus/metrics` only with `return_perf_metrics` (`mount_metrics`), its series named
 *   `trtllm_…` with labels `model_name="undefined"`, `engine_type="undefined"`
 *   (tensorrt_llm/metrics/collector.py @ 050f80def8df236e326949c8bd9dee10fd896a83); `/version` is
 *   `{"version": VERSION}`; no API-key middleware is registered.
 *
 * Not confirmed from source: whether the end id (the tokenizer's EOS, gpt-oss 200002)
 * appears in `token_ids`; the stand-in leaves it out (`endIdInOutput: false`), the
 * harder case for the sidecar. Profile "old": a trtllm-serve without `detokenize` on
 * completions (refused as an extra field).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { recordingServer, type Received } from "./recording.js";

type Obj = Record<string, unknown>;

export interface TrtllmConfig {
  profile: "current" | "old";
  /** The model as trtllm-serve names it (the directory's name). */
  model: string;
  /** `--max_seq_len`. */
  maxSeqLen: number;
  /** The tokenizer's EOS, the engine's end id (gpt-oss: <|return|> 200002). */
  endId: number;
  /** Whether the end id is kept in `token_ids` (not confirmed from source). */
  endIdInOutput: boolean;
  /** `return_perf_metrics`: Prometheus text at /prometheus/metrics. */
  returnPerfMetrics: boolean;
  /** What /version says. */
  version: string;
}

export interface TrtllmScript {
  tokens?: number[] | number[][];
  /** The request is cancelled after this many ids (finish "cancelled"). */
  cancelAfter?: number;
  /** An exception after this many chunks: the connection breaks. */
  breakAfter?: number;
  status?: number;
  errorBody?: unknown;
  config?: Partial<TrtllmConfig>;
}

export type { Received };

export interface TrtllmStandIn {
  url: string;
  config: TrtllmConfig;
  received: Received[];
  completions(): Received[];
  script(...s: TrtllmScript[]): void;
  close(): Promise<void>;
}

export const TRTLLM_GPT_OSS: Readonly<TrtllmConfig> = Object.freeze({
  profile: "current",
  model: "gpt-oss-20b",
  maxSeqLen: 131072,
  endId: 200002,
  endIdInOutput: false,
  returnPerfMetrics: true,
  version: "0.0.0-stand-in",
});

/** CompletionRequest's fields without `Optional`, and pydantic's type name for each. */
const NOT_NULL: Readonly<Record<string, string>> = {
  n: "int_type",
  top_k: "int_type",
  min_p: "float_type",
  repetition_penalty: "float_type",
};

/** CompletionRequest's fields (openai_protocol.py); "detokenize" only in the current profile. */
const FIELDS = [
  "model",
  "prompt",
  "best_of",
  "echo",
  "frequency_penalty",
  "logit_bias",
  "logprobs",
  "max_tokens",
  "n",
  "presence_penalty",
  "seed",
  "stop",
  "stream",
  "stream_options",
  "suffix",
  "temperature",
  "top_p",
  "user",
  "lora_request",
  "prompt_ignore_length",
  "use_beam_search",
  "top_k",
  "top_p_min",
  "min_p",
  "repetition_penalty",
  "length_penalty",
  "early_stopping",
  "stop_token_ids",
  "include_stop_str_in_output",
  "ignore_eos",
  "min_tokens",
  "skip_special_tokens",
  "spaces_between_special_tokens",
  "truncate_prompt_tokens",
  "return_context_logits",
  "thinking_token_budget",
  "add_special_tokens",
  "response_format",
  "disaggregated_params",
  "priority",
  "conversation_params",
];

function isIntList(v: unknown): v is number[] {
  return Array.isArray(v) && v.every((x) => Number.isInteger(x) && (x as number) >= 0);
}

export async function startTrtllm(initial: Partial<TrtllmConfig> = {}): Promise<TrtllmStandIn> {
  const config: TrtllmConfig = { ...TRTLLM_GPT_OSS, ...initial };
  let scripts: TrtllmScript[] = [{}];
  const received: Received[] = [];

  const json = (res: http.ServerResponse, rec: Received, status: number, body: unknown) => {
    rec.status = status;
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  };
  const errorResponse = (message: string) => ({ object: "error", message, type: "BadRequestError", param: null, code: 400 });
  // pydantic's ValidationError text, as str(exc) gives it
  const validation = (loc: string, msg: string, type: string) => ({
    error: `1 validation error for CompletionRequest\n${loc}\n  ${msg} [type=${type}]`,
  });

  const server = recordingServer(received, route);

  async function route(req: http.IncomingMessage, res: http.ServerResponse, rec: Received): Promise<void> {
    if (rec.path === "/health" && req.method === "GET") {
      rec.status = 200;
      res.end();
      return;
    }
    if (rec.path === "/version" && req.method === "GET") return json(res, rec, 200, { version: config.version });
    // get_iteration_stats: a JSON list, whatever the scraper expected
    if (rec.path === "/metrics" && req.method === "GET") return json(res, rec, 200, [{ iter: 1, numActiveRequests: 0, gpuMemUsage: 0 }]);
    if (rec.path === "/prometheus/metrics" && req.method === "GET" && config.returnPerfMetrics) {
      const labels = 'engine_type="undefined",model_name="undefined"';
      const text = [
        "# HELP trtllm_num_requests_running Number of active requests",
        "# TYPE trtllm_num_requests_running gauge",
        `trtllm_num_requests_running{${labels}} 0.0`,
        "# HELP trtllm_kv_cache_utilization KV cache utilization",
        "# TYPE trtllm_kv_cache_utilization gauge",
        `trtllm_kv_cache_utilization{${labels}} 0.0`,
        "",
      ].join("\n");
      rec.status = 200;
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
      res.end(text);
      return;
    }
    if (rec.path === "/v1/models" && req.method === "GET") {
      return json(res, rec, 200, {
        object: "list",
        data: [{ id: config.model, object: "model", created: Math.floor(Date.now() / 1000), owned_by: "tensorrt_llm" }],
      });
    }
    if (rec.path !== "/v1/completions" || req.method !== "POST") return json(res, rec, 404, { detail: "Not Found" });
    const s = scripts.length > 1 ? scripts.shift()! : scripts[0]!;
    const cfg: TrtllmConfig = { ...config, ...(s.config ?? {}) };
    if (s.status) return json(res, rec, s.status, s.errorBody ?? errorResponse(`scripted ${s.status}`));
    const b = rec.body;
    if (!b) return json(res, rec, 400, validation("body", "Input should be a valid dictionary", "dict_type"));
    const known = cfg.profile === "current" ? [...FIELDS, "detokenize"] : FIELDS;
    for (const k of Object.keys(b))
      if (!known.includes(k)) return json(res, rec, 400, validation(k, "Extra inputs are not permitted", "extra_forbidden"));
    if (typeof b.model !== "string") return json(res, rec, 400, validation("model", "Field required", "missing"));
    for (const [k, type] of Object.entries(NOT_NULL))
      if (b[k] === null)
        return json(res, rec, 400, validation(k, `Input should be a valid ${type === "int_type" ? "integer" : "number"}`, type));
    if (b.stream_options && !b.stream)
      return json(res, rec, 400, validation("", "Value error, Stream options can only be defined when stream is true.", "value_error"));
    if (!isIntList(b.prompt) || b.prompt.length === 0)
      return json(res, rec, 400, errorResponse("prompt must be a non-empty list of token ids"));
    const prompt = b.prompt;
    // _deduce_max_tokens
    const deduced = cfg.maxSeqLen - prompt.length;
    if (deduced <= 0)
      return json(
        res,
        rec,
        400,
        errorResponse(
          `\`default_max_tokens\` (${deduced}) must be greater than 0, \`default_max_tokens\` (${deduced}) = max_seq_len (${cfg.maxSeqLen}) - \`splited_prompt_len\` (${prompt.length}) - \`query_token_len\` (0)`,
        ),
      );
    const maxTokens = typeof b.max_tokens === "number" ? Math.min(b.max_tokens, deduced) : deduced;
    const n = typeof b.n === "number" ? b.n : 1;
    const detokenize = b.detokenize !== false;
    const stopIds = new Set(Array.isArray(b.stop_token_ids) ? (b.stop_token_ids as number[]) : []);
    const keepStop = b.include_stop_str_in_output === true;
    const so = b.stream_options as Obj | null | undefined;
    const includeUsage = !!so && so.include_usage !== false;
    if (b.stream !== true) return json(res, rec, 400, errorResponse("the stand-in streams only"));
    rec.status = 200;
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
    const id = `cmpl-${Math.random().toString(16).slice(2)}`;
    const created = Math.floor(Date.now() / 1000);
    let sent = 0;
    const send = (data: unknown): boolean => {
      if (s.breakAfter !== undefined && sent >= s.breakAfter) {
        res.socket?.destroy();
        return false;
      }
      sent++;
      rec.events.push(data);
      res.write(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
      return true;
    };
    const perChoice = (i: number): number[] => {
      const t = s.tokens ?? [];
      return Array.isArray(t[0]) ? ((t as number[][])[i] ?? []) : (t as number[]);
    };
    // one executor response per step of one sequence; the post-processor then emits every output
    const outs = Array.from({ length: n }, (_, i) => ({
      sampled: [...perChoice(i)],
      length: 0,
      diff: [] as number[],
      finish: null as string | null,
      stopReason: null as number | null,
    }));
    while (outs.some((o) => o.finish === null)) {
      for (let i = 0; i < n; i++) {
        const o = outs[i]!;
        if (o.finish !== null) continue;
        let ids: number[] = [];
        if (s.cancelAfter === o.length) o.finish = "cancelled";
        else {
          const tok = o.sampled.shift() ?? cfg.endId;
          o.length++;
          ids = [tok];
          if (tok === cfg.endId) {
            o.finish = "stop";
            if (!cfg.endIdInOutput) ids = [];
          } else if (stopIds.has(tok)) {
            o.finish = "stop";
            o.stopReason = tok;
            if (!keepStop) ids = [];
          } else if (o.length >= maxTokens) o.finish = "length";
        }
        o.diff = ids;
        // for output in rsp.outputs: the outputs this response is not for keep their last diff
        for (let j = 0; j < n; j++) {
          const p = outs[j]!;
          const choice = {
            index: j,
            text: detokenize ? p.diff.map(String).join(" ") : "",
            token_ids: detokenize ? null : p.diff,
            logprobs: null,
            finish_reason: p.finish,
            stop_reason: p.stopReason,
            avg_decoded_tokens_per_iter: null,
          };
          if (!send({ id, object: "text_completion", created, model: b.model, choices: [choice], usage: null })) return;
        }
      }
    }
    const completion = outs.reduce((a, o) => a + o.length, 0);
    if (includeUsage) {
      send({
        id,
        object: "text_completion",
        created,
        model: b.model,
        choices: [],
        usage: {
          prompt_tokens: prompt.length,
          total_tokens: prompt.length + completion,
          completion_tokens: completion,
          prompt_tokens_details: { cached_tokens: 0 },
        },
      });
    }
    if (send("[DONE]")) res.end();
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
