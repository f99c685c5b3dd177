/**
 * A stand-in for llama.cpp's `llama-server`, written from llama.cpp's own source,
 * for tests without a model: the native `POST /completion` (streaming) driven by
 * token ids with `return_tokens`, `GET /props`, `GET /v1/models`, `GET /health`.
 * What the "model" samples is scripted (`script({ tokens })`); what llama-server
 * does with it is llama.cpp's.
 *
 * Sources read (repository ggml-org/llama.cpp; the commit is the version the code
 * index held for each file):
 * - tools/server/server-task.cpp @ 00efb3e184262872916bf136b3df63c1822a19bd
 *   `params_from_json_cmpl` (`stream`, `return_tokens`, `n_predict` ← `max_tokens`, `stop`
 *   strings only, unknown fields ignored), the partial chunk
 *   `{index, content, tokens, stop: false, id_slot, tokens_predicted, tokens_evaluated}`,
 *   the final `{index, content, tokens, id_slot, stop: true, model, tokens_predicted,
 *   tokens_evaluated, generation_settings, prompt, has_new_line, truncated, stop_type,
 *   stopping_word, tokens_cached, timings}`, `stop_type_to_str` (eos/word/limit/none).
 * - tools/server/server-context.cpp (index excerpts; listed @ fb4026604c67c682f552337ec9b91eced0abd35a):
 *   `process_token` (each token, the end-of-generation one too, sent in a partial with
 *   `tokens: [id]`; EOG → eos; n_predict reached or `n_past + 1 >= n_ctx` → limit),
 *   `send_final_response` (stream mode: `content: ""`, `tokens: []`), `handle_completions_impl`
 *   (the first error answered as an HTTP error `{"error": {code, message, type}}`; later
 *   ones as `data: {"error": …}` and the end of the stream; no `[DONE]` on /completion),
 *   the prompt check ("the request exceeds the available context size, try increasing it",
 *   `exceed_context_size_error`), `/props` (`default_generation_settings.n_ctx`), `/health`.
 * - llama-vocab.cpp (index excerpt) and gpt-oss GGUF load logs: EOG = 199999, 200002,
 *   200012 (`<|end|>` removed from the EOG list when `<|return|>` and `<|call|>` are both in).
 * - `/v1/models` (`owned_by: "llamacpp"`, `meta.n_ctx_train`): index excerpts of
 *   server-models / server.cpp.
 *
 * - tools/server/server-context.cpp @ fb4026604c67c682f552337ec9b91eced0abd35a `process_token`:
 *   each id's piece is appended to `generated_text`; while `validate_utf8` (server-common.cpp,
 *   index excerpt: a lead byte within the last 4 whose character is not complete) says the text
 *   ends inside a character, no partial is sent; the next partial's `content` is all the text
 *   not sent yet (`generated_text.substr(n_sent_text)`), its `tokens` only its own id
 *   (`send_partial_response`: `res->tokens = { tkn.tok }`), its `tokens_predicted` the ids
 *   decoded so far. A piece is a special's text only when `accept_special_token`:
 *   `params_base.special` (`--special`) or the id is in the request's `preserved_tokens`
 *   (server-task.cpp `params_from_json_cmpl`: each string that tokenizes to one id); else "".
 *   An end-of-generation id whose piece leaves the text incomplete is never sent at all.
 * - tools/server/server-http.cpp @ 00dd0816129a5210351c78bb90e0828f8eb69f99 (`--api-key`): every
 *   path but /health, /v1/health, /models, /v1/models and / needs the key (`Authorization:
 *   Bearer`, or `X-Api-Key`), else 401 `{"error": {"message": "Invalid API Key", "type":
 *   "authentication_error", "code": 401}}`.
 * - `/metrics` (with `--metrics`): Prometheus text, `llamacpp:` series such as
 *   `llamacpp:prompt_tokens_total` (read in index excerpts of the server's README); without the
 *   flag an error answer (its wording not pinned here).
 *
 * Profile "old": a llama-server from before `return_tokens`: partials without `tokens`, finals
 * with `stopped_eos` / `stopped_word` / `stopped_limit` instead of `stop_type`.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { defaultDecode } from "./vllm.js";
import { recordingServer, SPECIAL_TEXT, type Received } from "./recording.js";

type Obj = Record<string, unknown>;

export interface LlamacppConfig {
  profile: "current" | "old";
  /** `--alias`, or the model file's name. */
  model: string;
  /** The slot's context (`-c` / `-np`). */
  nCtx: number;
  nCtxTrain: number;
  /** End-of-generation ids of the vocabulary. */
  eog: number[];
  /** `-n` (default -1: until the context is full). */
  nPredict: number;
  /**
   * Each ordinary id's bytes (the model's vocabulary); default: a placeholder text per id.
   * With real bytes, characters split across ids are held as llama-server holds them.
   */
  pieceBytes: ((id: number) => Uint8Array) | null;
  /** `--special`: every special's text is written into `content`. */
  special: boolean;
  /** Whether the build reads the request's `preserved_tokens` (false: an older build ignores it). */
  preservedTokens: boolean;
  /** `--api-key` (null: none). */
  apiKey: string | null;
  /** `--metrics`. */
  metrics: boolean;
}

/** server-common.cpp `validate_utf8`: the length up to a character cut at the end. */
function validUtf8Length(b: Buffer): number {
  const len = b.length;
  for (let i = 1; i <= 4 && i <= len; i++) {
    const c = b[len - i]!;
    if ((c & 0xe0) === 0xc0) {
      if (i < 2) return len - i;
    } else if ((c & 0xf0) === 0xe0) {
      if (i < 3) return len - i;
    } else if ((c & 0xf8) === 0xf0) {
      if (i < 4) return len - i;
    }
  }
  return len;
}

export interface LlamacppScript {
  tokens?: number[];
  /** An error after this many ids (`data: {"error": …}`, then the stream ends). */
  errorAfter?: number;
  status?: number;
  errorBody?: unknown;
  config?: Partial<LlamacppConfig>;
}

export type { Received };

export interface LlamacppStandIn {
  url: string;
  config: LlamacppConfig;
  received: Received[];
  completions(): Received[];
  script(...s: LlamacppScript[]): void;
  close(): Promise<void>;
}

export const LLAMACPP_GPT_OSS: Readonly<LlamacppConfig> = Object.freeze({
  profile: "current",
  model: "gpt-oss-20b-mxfp4.gguf",
  nCtx: 131072,
  nCtxTrain: 131072,
  eog: [199999, 200002, 200012],
  nPredict: -1,
  pieceBytes: null,
  special: false,
  preservedTokens: true,
  apiKey: null,
  metrics: true,
});

function isIntList(v: unknown): v is number[] {
  return Array.isArray(v) && v.every((x) => Number.isInteger(x) && (x as number) >= 0);
}

export async function startLlamacpp(initial: Partial<LlamacppConfig> = {}): Promise<LlamacppStandIn> {
  const config: LlamacppConfig = { ...LLAMACPP_GPT_OSS, ...initial };
  let scripts: LlamacppScript[] = [{}];
  const received: Received[] = [];

  const json = (res: http.ServerResponse, rec: Received, status: number, body: unknown) => {
    rec.status = status;
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text) });
    res.end(text);
  };
  const error = (code: number, message: string, type: string, extra: Obj = {}) => ({ error: { code, message, type, ...extra } });

  const server = recordingServer(received, route);

  const PUBLIC = new Set(["/health", "/v1/health", "/models", "/v1/models", "/"]);

  async function route(req: http.IncomingMessage, res: http.ServerResponse, rec: Received): Promise<void> {
    if (config.apiKey !== null && !PUBLIC.has(rec.path)) {
      const given = String(req.headers.authorization ?? req.headers["x-api-key"] ?? "").replace(/^Bearer /, "");
      if (given !== config.apiKey) return json(res, rec, 401, error(401, "Invalid API Key", "authentication_error"));
    }
    if (rec.path === "/health") return json(res, rec, 200, { status: "ok" });
    if (rec.path === "/metrics" && req.method === "GET") {
      if (!config.metrics) return json(res, rec, 501, error(501, "the server was started without --metrics", "not_supported_error"));
      const text = [
        "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.",
        "# TYPE llamacpp:prompt_tokens_total counter",
        "llamacpp:prompt_tokens_total 0",
        "# HELP llamacpp:requests_processing Number of requests processing.",
        "# TYPE llamacpp:requests_processing gauge",
        "llamacpp:requests_processing 0",
        "",
      ].join("\n");
      rec.status = 200;
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
      res.end(text);
      return;
    }
    if (rec.path === "/props" && req.method === "GET") {
      return json(res, rec, 200, {
        default_generation_settings: { params: { n_predict: config.nPredict, temperature: 0.8 }, n_ctx: config.nCtx },
        total_slots: 1,
        model_alias: config.model,
        model_path: `/models/${config.model}`,
        modalities: { vision: false, audio: false },
        build_info: "b0000-stand-in",
      });
    }
    if (rec.path === "/v1/models" && req.method === "GET") {
      return json(res, rec, 200, {
        models: [{ name: config.model, model: config.model }],
        object: "list",
        data: [
          {
            id: config.model,
            object: "model",
            created: Math.floor(Date.now() / 1000),
            owned_by: "llamacpp",
            meta: { n_ctx_train: config.nCtxTrain },
          },
        ],
      });
    }
    if (rec.path !== "/completion" || req.method !== "POST") return json(res, rec, 404, error(404, "File Not Found", "not_found_error"));
    const s = scripts.length > 1 ? scripts.shift()! : scripts[0]!;
    const cfg: LlamacppConfig = { ...config, ...(s.config ?? {}) };
    if (s.status) return json(res, rec, s.status, s.errorBody ?? error(s.status, `scripted ${s.status}`, "server_error"));
    const b = rec.body;
    if (!b) return json(res, rec, 500, error(500, "[json.exception.parse_error.101] parse error", "server_error"));
    if (!("prompt" in b))
      return json(res, rec, 400, error(400, "[json.exception.out_of_range.403] key 'prompt' not found", "invalid_request_error"));
    if (!isIntList(b.prompt) || b.prompt.length === 0)
      return json(res, rec, 400, error(400, "the stand-in takes token-id prompts only", "invalid_request_error"));
    const prompt = b.prompt;
    // the first error of a stream is answered as a plain HTTP error
    if (prompt.length >= cfg.nCtx)
      return json(
        res,
        rec,
        400,
        error(400, "the request exceeds the available context size, try increasing it", "exceed_context_size_error", {
          n_prompt_tokens: prompt.length,
          n_ctx: cfg.nCtx,
        }),
      );
    const nPredict = typeof b.n_predict === "number" ? b.n_predict : typeof b.max_tokens === "number" ? b.max_tokens : cfg.nPredict;
    const returnTokens = cfg.profile === "current" && b.return_tokens === true;
    const stream = b.stream === true;
    if (!stream) return json(res, rec, 400, error(400, "the stand-in streams only", "invalid_request_error"));
    rec.status = 200;
    res.writeHead(200, { "content-type": "text/event-stream" });
    const send = (data: unknown) => {
      rec.events.push(data);
      res.write(`data: ${JSON.stringify(data)}\n\n`);
    };
    const sampled = [...(s.tokens ?? [])];
    // preserved_tokens: each string that is one special id (the stand-in knows gpt-oss's named ones)
    const preserved = new Set<number>();
    if (cfg.preservedTokens && Array.isArray(b.preserved_tokens))
      for (const t of b.preserved_tokens as unknown[])
        for (const [id, text] of Object.entries(SPECIAL_TEXT)) if (t === text) preserved.add(Number(id));
    const pieceOf = (tok: number): Buffer => {
      const name = SPECIAL_TEXT[tok];
      if (tok >= 199998) return cfg.special || preserved.has(tok) ? Buffer.from(name ?? `<|reserved_${tok}|>`) : Buffer.alloc(0);
      return cfg.pieceBytes ? Buffer.from(cfg.pieceBytes(tok)) : Buffer.from(defaultDecode(tok));
    };
    let generated = Buffer.alloc(0);
    let sentBytes = 0;
    let decoded = 0;
    let stop: "eos" | "limit" | "none" = "none";
    let truncated = false;
    for (;;) {
      if (s.errorAfter === decoded) {
        send({ error: { code: 500, message: "scripted error", type: "server_error" } });
        res.end();
        return;
      }
      const tok = sampled.shift() ?? cfg.eog[1]!;
      decoded++;
      generated = Buffer.concat([generated, pieceOf(tok)]);
      // process_token: no partial while the text ends inside a character
      const incomplete = validUtf8Length(generated) < generated.length;
      if (!incomplete) {
        const content = generated.subarray(sentBytes).toString("utf8");
        sentBytes = generated.length;
        const partial: Obj =
          cfg.profile === "current"
            ? {
                index: 0,
                content,
                tokens: returnTokens ? [tok] : [],
                stop: false,
                id_slot: 0,
                tokens_predicted: decoded,
                tokens_evaluated: prompt.length,
              }
            : { content, stop: false, id_slot: 0, multimodal: false, index: 0 };
        send(partial);
      }
      if (nPredict > 0 && decoded >= nPredict) stop = "limit";
      if (prompt.length + decoded + 1 >= cfg.nCtx) {
        stop = "limit";
        truncated = true;
      }
      if (cfg.eog.includes(tok)) stop = "eos";
      if (stop !== "none") break;
    }
    const common: Obj = {
      index: 0,
      content: "",
      tokens: [],
      id_slot: 0,
      stop: true,
      model: cfg.model,
      tokens_predicted: decoded,
      tokens_evaluated: prompt.length,
      generation_settings: { n_predict: nPredict },
      prompt: "",
      has_new_line: false,
      truncated,
      stopping_word: "",
      tokens_cached: prompt.length + decoded,
      timings: { prompt_n: prompt.length, predicted_n: decoded },
    };
    if (cfg.profile === "current") send({ ...common, stop_type: stop });
    else {
      delete common.tokens;
      send({ ...common, stopped_eos: stop === "eos", stopped_word: false, stopped_limit: stop === "limit" });
    }
    res.end(); // /completion: no [DONE]
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    config,
    received,
    completions: () => received.filter((r) => r.path === "/completion"),
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
